"""The settings of :func:`tokpack.prepare` as three records, each checked when it is made: how the
corpus is read into documents (:class:`CorpusReading`), which vocabulary the ids come from
(:class:`VocabularyRequest`), and how the encoding runs (:class:`Execution`).

Pass them to ``prepare`` (``prepare(corpus, vocabulary=VocabularyRequest(vocab_size=4096))``) or
give their fields as ``prepare``'s keywords, which build them:

>>> VocabularyRequest(vocab_size=4096).trained_vocab_size, VocabularyRequest().trained_vocab_size
(4096, 50257)
>>> VocabularyRequest(vocab="tokenizer.json", vocab_size=4096, min_frequency=3)
Traceback (most recent call last):
...
tokpack.errors.InputError: vocab_size, min_frequency are for training a vocabulary; vocab= gives one (with its own size); drop vocab_size, min_frequency, or vocab=
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tokpack import _checks as checks
from tokpack._progress import ProgressCallback
from tokpack.corpus.sources import DocumentSource, OnError, open_corpus
from tokpack.errors import InputError
from tokpack.vocab.loading import VocabularySpec
from tokpack.vocab.trainers import Trainer

#: Ids of the vocabulary ``prepare`` trains unless told (GPT-2's size).
DEFAULT_VOCAB_SIZE = 50257
#: The most text ``prepare`` trains a vocabulary on unless told: the whole training range up to
#: this, else pieces of it this large in all. A bound, so training time and memory stay bounded
#: however large the corpus; chosen in bench/bench_vocab_sample.py (BENCHMARKS.md, "The
#: vocabulary sample").
DEFAULT_VOCAB_SAMPLE_BYTES = 500_000_000
#: A merge needs a pair seen this often unless told.
DEFAULT_MIN_FREQUENCY = 2


@dataclass(frozen=True)
class CorpusReading:
    """How a corpus is read into documents.

    Attributes:
        document_bytes: the longest document (at least 4); ``None``: the size a text file's
            manifest was cut with (see :func:`~tokpack.corpus.sources.reading_cut`), else 1 MiB.
        separator: text that ends a document and is in none of them (``"<|endoftext|>"``, a
            blank line ``"\\n\\n"``); longer documents are still cut by the newline rule.
        text_field: the field (JSON Lines) or column (parquet) holding the text.
        on_error: ``"raise"`` at the first unreadable file or record, or ``"skip"`` it and count it.
        manifest: a text file's manifest, read there instead of ``CORPUS.manifest.json`` beside it.

    Raises:
        InputError: a setting out of range, named.
    """

    document_bytes: int | None = None
    separator: str | None = None
    text_field: str = "text"
    on_error: OnError = "raise"
    manifest: str | Path | None = None

    def __post_init__(self) -> None:
        from tokpack.corpus.sources import check_separator

        if self.document_bytes is not None:
            checks.integer("document_bytes", self.document_bytes, low=4, what="an integer of at least 4")
        check_separator(self.separator)
        checks.text("text_field", self.text_field)
        checks.choice("on_error", self.on_error, ("raise", "skip"))
        if self.manifest is not None and not isinstance(self.manifest, (str, os.PathLike)):
            raise InputError(f"manifest must be a path, got {type(self.manifest).__name__}")

    def open(self, corpus: str | Path) -> DocumentSource:
        """``corpus`` opened in its format by this rule (see :func:`tokpack.corpus.sources.open_corpus`)."""
        return open_corpus(corpus, document_bytes=self.document_bytes, on_error=self.on_error,
                           text_field=self.text_field, separator=self.separator, manifest=self.manifest)


#: The settings of a vocabulary to train, refused beside a vocabulary given.
TRAINING_OPTIONS = ("vocab_size", "min_frequency", "vocab_sample_bytes", "allow_smaller_vocab")


@dataclass(frozen=True)
class VocabularyRequest:
    """The vocabulary the ids come from: ``vocab`` when given, else one trained on the training range.

    Attributes:
        vocab: your vocabulary (anything :func:`~tokpack.vocab.loading.load_vocabulary` takes).
        vocab_size: ids of the vocabulary to train, ``<|endoftext|>`` included; ``None``:
            :data:`DEFAULT_VOCAB_SIZE`.
        allow_smaller_vocab: accept a trained vocabulary with fewer ids than ``vocab_size``.
        min_frequency: a merge needs a pair seen at least this often; ``None``: :data:`DEFAULT_MIN_FREQUENCY`.
        vocab_sample_bytes: the most text the vocabulary is trained on; ``None``:
            :data:`DEFAULT_VOCAB_SAMPLE_BYTES`.
        trainer: ``"exact"`` (tokpack's own) or ``"hf"`` (Hugging Face ``tokenizers``).
        pattern: the pre-tokenizer for training (a named pattern or a regex; the default pattern
            when ``None``), or for a bare rank file given as ``vocab``.

    Raises:
        InputError: a setting out of range, or a training setting (:data:`TRAINING_OPTIONS`, or a trainer)
            beside ``vocab``: every one given is named.
    """

    vocab: VocabularySpec | None = None
    vocab_size: int | None = None
    allow_smaller_vocab: bool = False
    min_frequency: int | None = None
    vocab_sample_bytes: int | None = None
    trainer: Trainer = "exact"
    pattern: str | None = None

    def __post_init__(self) -> None:
        given = [name for name in TRAINING_OPTIONS if getattr(self, name) not in (None, False)]
        if self.trainer != "exact":  # the default trainer is no choice made
            given.append("trainer")
        if self.vocab is not None and given:  # before anything is read: they would be ignored
            raise InputError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for training a vocabulary; "
                             "vocab= gives one (with its own size)", fix=f"drop {', '.join(given)}, or vocab=")
        checks.integer("vocab_size", self.trained_vocab_size, low=257, high=1 << 32,  # 256 bytes and <|endoftext|>
                       what="an integer of at least 257 (the 256 bytes and <|endoftext|>)")
        checks.positive_int("min_frequency", self.trained_min_frequency)
        checks.positive_int("vocab_sample_bytes", self.trained_sample_bytes)
        checks.choice("trainer", self.trainer, ("exact", "hf"))
        if self.pattern is not None:
            from tokpack.vocab.patterns import resolve_pattern

            checks.text("pattern", self.pattern)
            # a name means what it means on the command line
            object.__setattr__(self, "pattern", resolve_pattern(self.pattern, "pattern"))

    @property
    def trained_vocab_size(self) -> int:
        """``vocab_size``, or its default."""
        return DEFAULT_VOCAB_SIZE if self.vocab_size is None else self.vocab_size

    @property
    def trained_min_frequency(self) -> int:
        """``min_frequency``, or its default."""
        return DEFAULT_MIN_FREQUENCY if self.min_frequency is None else self.min_frequency

    @property
    def trained_sample_bytes(self) -> int:
        """``vocab_sample_bytes``, or its default."""
        return DEFAULT_VOCAB_SAMPLE_BYTES if self.vocab_sample_bytes is None else self.vocab_sample_bytes


#: Text below which ``prepare`` encodes on one thread unless told (:meth:`Execution.threads`): a
#: second thread starts with a piece cache of its own, cold, and on this much text what it costs
#: in CPU (each common piece merged again) outweighs the wall time it saves; BENCHMARKS.md,
#: "prepare's fixed cost". One full batch of the defaults (16 documents of 1 MiB).
ONE_THREAD_BYTES = 16 << 20


@dataclass(frozen=True)
class Execution:
    """How the encoding runs: ``batch_documents`` encoded together on ``workers`` threads (when
    ``None``: one for less than :data:`ONE_THREAD_BYTES` of text, else every core; the pack is the
    same for any number), and ``report``, called with a :class:`~tokpack._progress.PrepareProgress`
    as work advances.

    Raises:
        InputError: a setting out of range, named.
    """

    batch_documents: int = 16
    workers: int | None = None
    report: ProgressCallback | None = None

    def __post_init__(self) -> None:
        checks.positive_int("batch_documents", self.batch_documents, high=1 << 20)
        if self.workers is not None:
            checks.positive_int("workers", self.workers, what="at least 1", fix="omit it for one per core")
        if self.report is not None and not callable(self.report):
            raise InputError(f"progress must be a function, got {type(self.report).__name__}")

    def threads(self, text_bytes: int) -> int:
        """The encoding threads for ``text_bytes`` of text: ``workers`` when given, else one below
        :data:`ONE_THREAD_BYTES` and every core from there.

        >>> Execution().threads(1 << 20), Execution(workers=3).threads(1 << 20)
        (1, 3)
        """
        if self.workers is not None:
            return self.workers
        return 1 if text_bytes < ONE_THREAD_BYTES else os.cpu_count() or 1

    def reporter(self) -> ProgressCallback:
        """The progress callback, or one that ignores what it hears."""
        return self.report or (lambda _: None)


def settings_record(record: Any, kind: type[Any], keyword: str, **flat: Any) -> Any:
    """``record`` when given (then none of its fields may come as ``flat`` keywords too, unless
    at its default), else a ``kind`` built from ``flat``.

    Raises:
        InputError: a field given both ways, named.
    """
    if record is None:
        return kind(**flat)
    if not isinstance(record, kind):
        raise InputError(f"{keyword} must be a {kind.__name__}, got {type(record).__name__}")
    defaults = {field.name: field.default for field in fields(kind)}
    both = [name for name, value in flat.items() if value is not None and value != defaults.get(name)]
    if both:
        raise InputError(f"{', '.join(both)} given beside {keyword}=", fix=f"give them in {keyword}= or as keywords, not both")
    return record
