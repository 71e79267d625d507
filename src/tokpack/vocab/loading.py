"""Turn whatever a user names as a vocabulary into a :class:`BpeTokenizer`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Union

from tokpack.errors import InputError
from tokpack.vocab.bytelevel import VOCABULARY_FILE, BpeTokenizer
from tokpack.vocab.files import read_gpt2_pair, read_rank_file, read_tokenizer_json
from tokpack.vocab.identity import require_vocabulary
from tokpack.vocab.patterns import END_OF_TEXT, GPT2_PATTERN

PathLike = Union[str, "os.PathLike[str]"]
VocabularySpec = Union[PathLike, tuple[PathLike, PathLike], BpeTokenizer, Any]


def load_vocabulary(spec: VocabularySpec, *, pattern: str | None = None) -> BpeTokenizer:
    """Load a byte-level BPE vocabulary.

    Args:
        spec: a tiktoken rank file; an ``(encoder.json, vocab.bpe)`` pair; a Hugging Face
            ``tokenizer.json``; a tokpack ``vocabulary.json`` or the directory holding one; a
            :class:`BpeTokenizer`; or any object with an ``as_tokenizer()`` method (a trainer's
            result).
        pattern: the pre-tokenizer for a rank file or a GPT-2 pair, which carry none (GPT-2's by
            default). Formats that record their pattern refuse a different one.

    Raises:
        ValueError: ``"bytes"`` (byte-level training needs no vocabulary), an unreadable or
            inconsistent file, or a ``pattern`` that contradicts the file's own.
    """
    if isinstance(spec, str) and spec == "bytes":
        raise InputError("'bytes' is not a vocabulary: byte-level training needs none")
    if isinstance(spec, BpeTokenizer):
        return _with_pattern(spec, pattern, "the given tokenizer")
    if hasattr(spec, "as_tokenizer"):
        return _with_pattern(spec.as_tokenizer(), pattern, type(spec).__name__)  # type: ignore[union-attr]
    if isinstance(spec, (tuple, list)):
        if len(spec) != 2:
            raise InputError("a GPT-2 vocabulary is a pair (encoder.json, vocab.bpe)")
        ranks, specials = read_gpt2_pair(Path(spec[0]), Path(spec[1]))
        if END_OF_TEXT not in specials:
            specials[END_OF_TEXT] = max(ranks.values()) + 1
        return BpeTokenizer(ranks=ranks, pattern=pattern or GPT2_PATTERN, special_tokens=specials)
    if not isinstance(spec, (str, os.PathLike)):  # a tokenizers.Tokenizer, a transformers tokenizer, a dict…
        raise InputError(None, f"cannot read a vocabulary from a {type(spec).__name__}",
                         fix="give a file: a rank file, tokenizer.json or vocabulary.json (a Hugging Face tokenizer "
                             "writes tokenizer.json with .save(path) or .save_pretrained(folder))")
    path = Path(spec)
    if path.is_dir():
        path = path / VOCABULARY_FILE
    if not path.is_file():
        raise InputError(f"{path}: no such vocabulary file")
    if path.suffix == ".json":
        if is_tokpack_record(path):
            return _with_pattern(BpeTokenizer.load_saved(path), pattern, str(path))
        ranks, file_pattern, specials = read_tokenizer_json(path)
        if END_OF_TEXT not in specials:
            specials[END_OF_TEXT] = max([*ranks.values(), *specials.values()]) + 1
        tokenizer = BpeTokenizer(ranks=ranks, pattern=file_pattern, special_tokens=specials)
        return _with_pattern(tokenizer, pattern, str(path))
    return BpeTokenizer(ranks=read_rank_file(path), pattern=pattern or GPT2_PATTERN)


def tokenizer_for(model: Any, vocabulary: VocabularySpec) -> BpeTokenizer:
    """Load ``vocabulary`` and return it only if it is the one ``model`` was trained on.

    Raises:
        ValueError: as :func:`load_vocabulary` and :func:`require_vocabulary`.
    """
    tokenizer = load_vocabulary(vocabulary)
    require_vocabulary(model, tokenizer)
    return tokenizer


def _with_pattern(tokenizer: BpeTokenizer, pattern: str | None, where: str) -> BpeTokenizer:
    if pattern is not None and pattern != tokenizer.pattern:
        raise InputError(f"{where} records its own pre-tokenizer pattern; pattern= contradicts it")
    return tokenizer


def is_tokpack_record(path: Path) -> bool:
    """Whether a JSON file is one of tokpack's own records (its ``schema`` starts ``tokpack.``).

    Raises:
        InputError: the file is not JSON.
    """
    try:
        with open(path, "rb") as handle:
            head = json.loads(handle.read())
    except (OSError, ValueError, RecursionError) as error:  # ValueError: JSON, UTF-8, a 5,000-digit number
        raise InputError(f"{path}: not JSON ({str(error).split(';')[0]})") from None
    return isinstance(head, dict) and str(head.get("schema", "")).startswith("tokpack.")
