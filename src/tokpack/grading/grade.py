"""Grade a tokenizer by compression: characters per token, globally and per domain.

Characters are Python code points of the file text read byte for byte (``\\r\\n`` counts two);
tokens are the ids the tokenizer produces without added special tokens. The global figure is
the sum of characters over the sum of tokens (never a mean of per-document or per-domain
ratios); each domain (first-level subfolder) gets its own figure, and the weakest domain is the
one with the lowest. Higher is better.

Tokenizers are read through :func:`load_counter`: a Hugging Face ``tokenizer.json``, a tiktoken
rank file (``.tiktoken``, with a pattern), a tokpack ``vocabulary.json`` or a sentencepiece
``.model`` (for baselines).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

from pydantic import Field

from tokpack import _checks as checks
from tokpack._schema import Record
from tokpack.errors import InputError
from tokpack.grading.files import corpus_files, read_document
from tokpack.vocab.loading import is_tokpack_record

#: The reference's public thresholds.
MIN_GLOBAL = 3.30
MIN_DOMAIN = 2.50


@dataclass(frozen=True)
class TokenCounter:
    """Something that turns texts into token counts, and its vocabulary size."""

    name: str
    vocab_size: int
    count: Callable[[Sequence[str]], list[int]]


class DomainGrade(Record):
    """One domain's compression."""

    domain: str
    documents: int = Field(ge=1)
    characters: int = Field(ge=0)
    tokens: int = Field(ge=0)
    chars_per_token: float
    passed: bool


class GradeReport(Record):
    """``grade --json``: the whole grading, thresholds and verdict included."""

    schema_: Literal["tokpack.grade.v1"] = Field(default="tokpack.grade.v1", alias="schema")
    tokenizer: str
    data_dir: str
    vocab_size: int
    documents: int
    characters: int
    tokens: int
    chars_per_token: float
    domains: list[DomainGrade]
    weakest_domain: str
    min_global: float
    min_domain: float
    passed: bool


def chars_per_token(characters: int, tokens: int) -> float:
    """``characters / tokens``; an empty text (no tokens) compresses perfectly by convention.

    >>> chars_per_token(1200, 400), chars_per_token(1200, 300)
    (3.0, 4.0)
    """
    return characters / tokens if tokens else float("inf") if characters else 0.0


def grade(
    counter: TokenCounter,
    data_dir: Path,
    *,
    min_global: float = MIN_GLOBAL,
    min_domain: float = MIN_DOMAIN,
) -> GradeReport:
    """Grade ``counter`` on every usable file of ``data_dir`` (see :func:`corpus_files`).

    Raises:
        InputError: ``data_dir`` is not a directory, has no usable file, or a file cannot be
            read.
    """
    min_global = checks.finite_float("min_global", min_global, low=0.0)
    min_domain = checks.finite_float("min_domain", min_domain, low=0.0)
    listing = corpus_files(Path(data_dir))
    if not listing.files:
        raise InputError("no usable text file", where=data_dir)
    domains: list[DomainGrade] = []
    for domain, paths in listing.by_domain().items():
        texts = [read_document(path) for path in paths]
        characters = sum(len(text) for text in texts)
        tokens = sum(counter.count(texts))
        ratio = chars_per_token(characters, tokens)
        domains.append(DomainGrade(
            domain=domain, documents=len(texts), characters=characters, tokens=tokens,
            chars_per_token=ratio, passed=ratio >= min_domain,
        ))
    characters = sum(d.characters for d in domains)
    tokens = sum(d.tokens for d in domains)
    overall = chars_per_token(characters, tokens)
    return GradeReport(
        tokenizer=counter.name,
        data_dir=str(data_dir),
        vocab_size=counter.vocab_size,
        documents=len(listing.files),
        characters=characters,
        tokens=tokens,
        chars_per_token=overall,
        domains=domains,
        weakest_domain=min(domains, key=lambda d: d.chars_per_token).domain,
        min_global=min_global,
        min_domain=min_domain,
        passed=overall >= min_global and all(d.passed for d in domains),
    )


def load_counter(path: Path, *, pattern: str | None = None) -> TokenCounter:
    """Read a tokenizer file as a :class:`TokenCounter`.

    ``tokenizer.json`` is encoded by Hugging Face ``tokenizers`` as a user would load it (no
    added special tokens); ``.model`` by sentencepiece; a ``.tiktoken`` rank file or tokpack
    ``vocabulary.json`` by tiktoken (``pattern`` applies to rank files only; see :func:`tokpack.load_vocabulary`).

    Raises:
        InputError: a missing or unreadable file, or one of no known kind.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such file", where=path)
    if path.suffix == ".model":
        return _sentencepiece_counter(path)
    if path.suffix == ".json" and not is_tokpack_record(path):
        return _hf_counter(path)
    from tokpack.vocab.loading import load_vocabulary

    tokenizer = load_vocabulary(path, pattern=pattern)
    return bpe_counter(tokenizer, name=str(path))


def bpe_counter(tokenizer: object, *, name: str) -> TokenCounter:
    """A counter for a :class:`~tokpack.vocab.BpeTokenizer` (tiktoken, ordinary encoding)."""
    from tokpack.vocab import BpeTokenizer

    assert isinstance(tokenizer, BpeTokenizer)
    return TokenCounter(
        name=name,
        vocab_size=tokenizer.n_vocab,
        count=lambda texts: [len(ids) for ids in tokenizer.encode_batch(list(texts))],
    )


def _hf_counter(path: Path) -> TokenCounter:
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises bare Exceptions for bad files
        raise InputError(f"not a loadable tokenizer.json ({error})", where=path) from None

    def count(texts: Sequence[str]) -> list[int]:
        encodings = tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]

    return TokenCounter(str(path), tokenizer.get_vocab_size(with_added_tokens=True), count)


def _sentencepiece_counter(path: Path) -> TokenCounter:
    try:
        import sentencepiece
    except ImportError:
        raise InputError("grading a sentencepiece model needs the sentencepiece package", where=path) from None
    try:
        processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
    except (OSError, RuntimeError) as error:
        raise InputError(f"not a sentencepiece model ({error})", where=path) from None
    return TokenCounter(str(path), processor.get_piece_size(), lambda texts: [len(ids) for ids in processor.encode(list(texts))])
