"""Published tiktoken vocabularies, recognised by the SHA-256 of their rank file.

A rank file holds ranks only; the pre-tokenizer pattern and the special tokens that go with them
are published beside the file, in tiktoken's ``tiktoken_ext/openai_public.py``. The hashes,
patterns and special-token ids below are copied from there (tiktoken 0.14), so a rank file that
is byte for byte one of these encodes as tiktoken encodes it.
"""

from __future__ import annotations

from typing import NamedTuple

from tokpack.vocab.patterns import END_OF_TEXT, GPT2_PATTERN, GPT4_PATTERN, O200K_PATTERN

__all__ = ["O200K_PATTERN", "PUBLISHED", "Published"]

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
