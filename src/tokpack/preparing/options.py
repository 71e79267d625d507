"""What :func:`tokpack.prepare` hands to the steps it runs, grouped as it travels: how the corpus
is read into documents, which vocabulary the ids come from, and how the encoding runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokpack._progress import ProgressCallback
from tokpack.corpus.sources import DocumentSource, OnError, open_corpus
from tokpack.vocab.loading import VocabularySpec
from tokpack.vocab.trainers import Trainer

#: Ids of the vocabulary ``prepare`` trains unless told (GPT-2's size).
DEFAULT_VOCAB_SIZE = 50257
#: The most text ``prepare`` trains a vocabulary on unless told: the whole training range up to
#: this, else pieces of it this large in all. Chosen in bench/bench_vocab_sample.py: on 783 MB of
#: mixed text a 500 MB sample held 0.999x the held-out characters per token of the whole range
#: (100 MB: 0.997x) for 25.5 CPU s of training instead of 40.1; a bound, so training time and
#: memory stay bounded however large the corpus (BENCHMARKS.md, "The vocabulary sample").
DEFAULT_VOCAB_SAMPLE_BYTES = 500_000_000


@dataclass(frozen=True)
class CorpusReading:
    """How a corpus is read into documents: the cut rule (the longest document in bytes, and the
    separator that ends one), the field or column holding the text, what a bad file or record
    does (``raise`` or ``skip``), and a text file's manifest (``None``: the one beside it)."""

    document_bytes: int = 1_048_576
    separator: str | None = None
    text_field: str = "text"
    on_error: OnError = "raise"
    manifest: str | Path | None = None

    def open(self, corpus: str | Path) -> DocumentSource:
        """``corpus`` opened in its format by this rule (see :func:`tokpack.corpus.sources.open_corpus`)."""
        return open_corpus(corpus, document_bytes=self.document_bytes, on_error=self.on_error,
                           text_field=self.text_field, separator=self.separator, manifest=self.manifest)


@dataclass(frozen=True)
class VocabularyRequest:
    """The vocabulary the ids come from: ``vocab`` when given (``pattern`` then names a bare rank
    file's pre-tokenizer), else one trained to ``vocab_size`` ids by ``trainer`` on about
    ``sample_bytes`` of the training range, each merge seen ``min_frequency`` times, cut by
    ``pattern`` (the default pattern when ``None``); ``allow_smaller_vocab`` accepts fewer ids."""

    vocab: VocabularySpec | None = None
    vocab_size: int = DEFAULT_VOCAB_SIZE
    allow_smaller_vocab: bool = False
    min_frequency: int = 2
    sample_bytes: int = DEFAULT_VOCAB_SAMPLE_BYTES
    trainer: Trainer = "exact"
    pattern: str | None = None


@dataclass(frozen=True)
class Execution:
    """How the encoding runs: ``batch_documents`` encoded together on ``workers`` threads (every
    core when ``None``; the pack is the same for any number), and who hears the progress."""

    batch_documents: int = 16
    workers: int | None = None
    report: ProgressCallback | None = None

    def reporter(self) -> ProgressCallback:
        """The progress callback, or one that ignores what it hears."""
        return self.report or (lambda _: None)
