"""Published tiktoken vocabularies, recognised by the SHA-256 of their rank file.

A rank file holds ranks only; the pre-tokenizer pattern and the special tokens that go with them
are published beside the file, in tiktoken's ``tiktoken_ext/openai_public.py``. The hashes,
patterns and special-token ids below are copied from there (tiktoken 0.14), so a rank file that
is byte for byte one of these encodes as tiktoken encodes it.

Beside them, for cl100k and o200k, each token's last join (the merges of a ``tokenizer.json``,
:func:`~tokpack.vocab.merge_files.derive_merges`) as derived from the published file and shipped
in ``published_joins/`` (:func:`published_last_joins`): the first pack made with one of these
vocabularies carries its ``tokenizer.json`` without simulating the rank rule for every token.
``tests/vocab/test_published_joins.py`` holds them equal to a derivation (and writes them again).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tokpack.vocab.patterns import END_OF_TEXT, GPT2_PATTERN, GPT4_PATTERN, O200K_PATTERN

if TYPE_CHECKING:
    import numpy as np

__all__ = ["O200K_PATTERN", "PUBLISHED", "Published", "published_last_joins"]

_FIM = {"<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260}


class Published(NamedTuple):
    """A published vocabulary: its name, pattern and special tokens."""

    name: str
    pattern: str
    special_tokens: dict[str, int]


#: By the SHA-256 of the rank file's bytes. GPT-2's ``gpt2.tiktoken`` (as Whisper ships it) is
#: ``r50k_base.tiktoken``. cl100k's pattern is :data:`GPT4_PATTERN`, which cuts as tiktoken's
#: does and means the same in Hugging Face's regex engine too.
PUBLISHED: dict[str, Published] = {
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930":
        Published("r50k_base (GPT-2)", GPT2_PATTERN, {END_OF_TEXT: 50256}),
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069":
        Published("p50k_base", GPT2_PATTERN, {END_OF_TEXT: 50256}),
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7":
        Published("cl100k_base", GPT4_PATTERN, {END_OF_TEXT: 100257, **_FIM, "<|endofprompt|>": 100276}),
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d":
        Published("o200k_base", O200K_PATTERN, {END_OF_TEXT: 199999, "<|endofprompt|>": 200018}),
}

#: The published rank files (by SHA-256) whose last joins are shipped, and the file beside this
#: module that holds them: one byte a token in rank order, zlib-compressed.
JOINS_FILES: dict[str, str] = {
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7": "cl100k_base.joins",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d": "o200k_base.joins",
}
#: The folder of the shipped joins.
JOINS_FOLDER = Path(__file__).with_name("published_joins")


def published_last_joins(ranks_sha256: str, lengths: np.ndarray) -> np.ndarray | None:
    """The shipped last joins of the published rank file whose SHA-256 is ``ranks_sha256``, its
    tokens in rank order ``lengths[k]`` bytes long: for each token the length of the left part of
    the last join tiktoken's rank rule makes when it encodes that token alone (0 for a single
    byte; what :func:`~tokpack.vocab.compiled.last_joins` derives), as ``int64``. ``None`` when
    none are shipped for that file, or when the shipped ones do not fit ``lengths`` (a damaged
    install: the caller derives them).

    >>> import numpy as np
    >>> published_last_joins("0" * 64, np.ones(256, np.int64)) is None
    True
    """
    import zlib

    import numpy as np

    name = JOINS_FILES.get(ranks_sha256)
    if name is None:
        return None
    try:
        joins = np.frombuffer(zlib.decompress((JOINS_FOLDER / name).read_bytes()), np.uint8).astype(np.int64)
    except (OSError, zlib.error):
        return None
    single = lengths == 1
    if len(joins) != len(lengths) or bool(np.any(joins[single] != 0)) or bool(
            np.any((joins[~single] < 1) | (joins[~single] >= lengths[~single]))):
        return None
    return joins
