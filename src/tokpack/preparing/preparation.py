"""``prepare()``: tokenize a corpus file once into a cached, verified pack."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tokpack import _checks as checks
from tokpack._atomic import building, remove_abandoned
from tokpack._cache import UNWRITABLE_CACHE, default_cache_dir, locked
from tokpack._memory import return_freed_memory
from tokpack._progress import PrepareProgress, ProgressCallback
from tokpack.corpus.sources import (
    SAMPLE_PIECE_BYTES,
    DocumentSource,
    OnError,
    Piece,
    TrainingSample,
    Utf8Piece,
    check_exists,
    hold_out,
    reading_cut,
    warn_spelled_special_tokens,
)
from tokpack.errors import InputError, InputsSkipped, IntegrityError, TokpackError
from tokpack.preparing.options import CorpusReading, Execution, VocabularyRequest, settings_record
from tokpack.store import DocumentCut, Pack, PackMeta, PackWriter, Source, Span
from tokpack.store.format import DATASET_FILE, META_FILE, ShardPlace
from tokpack.vocab import BpeTokenizer, VocabIdentity, train_hf_bytelevel
from tokpack.vocab.bytelevel import VOCABULARY_FILE
from tokpack.vocab.loading import VocabularySpec, load_vocabulary
from tokpack.vocab.patterns import DEFAULT_PATTERN, check_covers, check_pattern
from tokpack.vocab.tokenizer_json_cache import reuse_tokenizer_json
from tokpack.vocab.trainers import TRAINED_SPECIAL_TOKENS, Trainer

if TYPE_CHECKING:
    import numpy as np

    from tokpack.serve.loader import PackedBatches
    from tokpack.serve.settings import BatchSettings


class TokenizedCorpus:
    """A prepared corpus: its verified pack (:meth:`pack`, its :attr:`meta`), the vocabulary its
    ids come from (:attr:`tokenizer`, named by :attr:`identity`), and its training batches
    (:meth:`batches`, a :class:`~tokpack.serve.loader.PackedBatches`)."""

    def __init__(self, tokens_dir: Path, vocabulary_path: Path, *, tokenizer: BpeTokenizer | None = None) -> None:
        """Open a prepared corpus (as :func:`prepare` returns it).

        Args:
            tokens_dir: the pack.
            vocabulary_path: its ``vocabulary.json``.
            tokenizer: that vocabulary already loaded (and checked against the file), so it is
                not parsed and hashed again; by default it is read from ``vocabulary_path``.

        Raises:
            InputError / IntegrityError: the pack does not match its meta, or the vocabulary is not the pack's.
        """
        self.tokens_dir = Path(tokens_dir)
        self.vocabulary_path = Path(vocabulary_path)
        self._pack = Pack(self.tokens_dir)
        vocabulary = tokenizer if tokenizer is not None else BpeTokenizer.load_saved(self.vocabulary_path)
        if vocabulary.identity != self._pack.vocabulary:
            raise InputError(f"not the vocabulary of {self.tokens_dir}", where=self.vocabulary_path)
        pad_id = self._pack.meta.pad_id
        if pad_id is not None and pad_id not in vocabulary.special_tokens.values():
            # A padding id the encoder can emit would make the loss ignore real tokens; the stream
            # may simply not hold it yet, so only the vocabulary can tell.
            raise IntegrityError(f"pad_id {pad_id} is an ordinary token of "
                                 f"{self.vocabulary_path.name}, one its encoder emits", where=self.tokens_dir / "meta.json", fix="rebuild the pack")
        self._tokenizer = vocabulary

    @property
    def meta(self) -> PackMeta:
        """The pack's ``meta.json``: counts, identity, source, cut, ranges, checksums."""
        return self._pack.meta

    @property
    def identity(self) -> VocabIdentity:
        """The vocabulary's identity record ``{schema, scheme, sha256, n_vocab}``."""
        return self._pack.vocabulary

    @property
    def tokenizer(self) -> BpeTokenizer:
        """The encoder for this corpus's vocabulary."""
        return self._tokenizer

    @property
    def n_vocab(self) -> int:
        """Number of ids, ``<|endoftext|>`` included."""
        return self.identity.n_vocab

    @property
    def vocabulary_sample(self) -> str | None:
        """What the vocabulary was trained on (``trained on all 0.3 MB of the training range, 34
        documents (validation held out)``, or the pieces of a sample), or ``None`` for a
        vocabulary you gave."""
        from tokpack._schema import read_record
        from tokpack.corpus.sources import SAMPLE_PIECE_BYTES, describe_sample
        from tokpack.vocab.bytelevel import VocabularyRecord

        trained_on = read_record(VocabularyRecord, self.vocabulary_path).trained_on or {}
        if "sample_documents" not in trained_on:
            return None
        pieces = trained_on.get("sample_pieces")
        return describe_sample(int(trained_on["sample_bytes_used"]), int(trained_on["training_range_bytes"]),
                               int(trained_on["sample_documents"]), None if pieces is None else int(pieces),
                               int(trained_on.get("sample_piece_bytes", SAMPLE_PIECE_BYTES)),
                               held_out=[name for name in self.meta.ranges if name != "train"])

    @property
    def vocabulary_sample_bytes(self) -> tuple[int, int] | None:
        """The bytes the vocabulary was trained on and the training range's, or ``None`` for a
        vocabulary you gave."""
        from tokpack._schema import read_record
        from tokpack.vocab.bytelevel import VocabularyRecord

        trained_on = read_record(VocabularyRecord, self.vocabulary_path).trained_on or {}
        if "sample_bytes_used" not in trained_on:
            return None
        return int(trained_on["sample_bytes_used"]), int(trained_on["training_range_bytes"])

    def pack(self) -> Pack:
        """The pack itself (tokens memory map, starts, meta)."""
        return self._pack

    def batches(self, settings: BatchSettings | None = None, **keywords: Any) -> PackedBatches:
        """Training batches over this pack: :class:`~tokpack.serve.loader.PackedBatches` with
        ``settings`` or its keywords (``length`` and ``global_batch`` at least)."""
        from tokpack.serve.loader import PackedBatches

        return PackedBatches(self.tokens_dir, settings, **keywords)

    def __repr__(self) -> str:
        meta = self.meta
        return f"TokenizedCorpus({meta.source.name!r}, n_docs={meta.n_docs}, n_tokens={meta.n_tokens}, vocabulary={self.identity.short})"


def prepare(
    corpus: str | Path,
    *,
    vocab: VocabularySpec | None = None,
    cache_dir: str | Path | None = None,
    vocab_size: int | None = None,
    allow_smaller_vocab: bool = False,
    min_frequency: int | None = None,
    vocab_sample_bytes: int | None = None,
    document_bytes: int | None = None,
    batch_documents: int = 16,
    trainer: Trainer = "exact",
    pattern: str | None = None,
    workers: int | None = None,
    text_field: str = "text",
    on_error: OnError = "raise",
    progress: ProgressCallback | None = None,
    validation: float = 0.0,
    test: float = 0.0,
    out: str | Path | None = None,
    separator: str | None = None,
    manifest: str | Path | None = None,
    reading: CorpusReading | None = None,
    vocabulary: VocabularyRequest | None = None,
    execution: Execution | None = None,
) -> TokenizedCorpus:
    """Tokenize a corpus once, cache the pack, and return it.

    The corpus is one UTF-8 text file (its manifest, ``CORPUS.manifest.json`` beside it or
    ``manifest``, see :class:`CorpusManifest`, is checked and its ranges used; without one the
    whole file is training data), a folder of text files (sorted; documents never span files), JSON Lines or
    parquet with a text field (see :mod:`tokpack.corpus.sources`). Documents are cut by the rule of
    :mod:`tokpack.corpus.documents` and each is encoded alone.

    Args:
        corpus: the file or folder.
        vocab: your vocabulary (anything :func:`load_vocabulary` takes); ``None`` trains one on
            the training range, all of it when it holds at most ``vocab_sample_bytes``, else that
            much in pieces spread evenly over it (deterministic; never validation or test data; see
            :meth:`~tokpack.corpus.sources.DocumentSource.training_sample` and
            :attr:`TokenizedCorpus.vocabulary_sample`).
        cache_dir: where packs and vocabularies live; ``$TOKPACK_CACHE`` or ``~/.cache/tokpack``.
        vocab_size: ids of the vocabulary to train, ``<|endoftext|>`` included (``n_vocab``, as
            Hugging Face counts it: the 256 bytes, the merges and ``<|endoftext|>``); GPT-2's
            50,257 by default. Refused with ``vocab`` (a given vocabulary has its own size).
        allow_smaller_vocab: accept a trained vocabulary with fewer ids than ``vocab_size`` when
            the sample holds too few pairs seen ``min_frequency`` times; by default that is an
            error naming the reachable count.
        min_frequency: a merge needs a pair seen at least this often (2 by default).
        vocab_sample_bytes: the most text the vocabulary is trained on (500 MB by default:
            :data:`~tokpack.preparing.options.DEFAULT_VOCAB_SAMPLE_BYTES`).
        document_bytes: the longest document (at least 4); ``None``: the size a text file's
            manifest was cut with (see :func:`~tokpack.corpus.sources.reading_cut`), else 1 MiB.
        batch_documents: documents encoded together (in parallel).
        trainer: ``"exact"`` (tokpack's own, :mod:`tokpack.bpe`: the default, as it trains faster
            and leaner than Hugging Face's at equal compression; BENCHMARKS.md, "Training BPE")
            or ``"hf"`` (Hugging Face ``tokenizers``).
        pattern: the pre-tokenizer for training (default :data:`~tokpack.vocab.patterns.DEFAULT_PATTERN`,
            GPT-4's), or for a rank file that has none (see :func:`load_vocabulary`).
        workers: encoding threads (default: one for less than 16 MiB of text, else every core:
            :data:`~tokpack.preparing.options.ONE_THREAD_BYTES`); the pack is the same for any number.
        text_field: the field (JSON Lines) or column (parquet) holding the text.
        on_error: ``"raise"`` at the first unreadable file or record, or ``"skip"`` it and count
            it (``meta.counts["skipped"]``).
        progress: called with a :class:`PrepareProgress` as work advances.
        validation, test: hold out these shares by writing the corpus's manifest (see
            :func:`tokpack.corpus.sources.hold_out`): of a text file's bytes, its end (validation,
            then test); of a folder's files, JSON Lines' records or Parquet's rows, whole ones spread
            evenly over it. 0 uses the manifest there, if any.
        out: the pack's folder (default: under the cache, named by corpus and vocabulary).
        separator: text that ends a document and is in none of them (``"<|endoftext|>"``, a
            blank line ``"\\n\\n"``); recorded in the pack's cut. Documents longer than
            ``document_bytes`` are still cut by the newline rule.
        manifest: the corpus's manifest, read (and, with ``validation``/``test``, written)
            there instead of ``CORPUS.manifest.json`` beside the corpus (for a read-only folder).
        reading, vocabulary, execution: the same settings as records (:class:`CorpusReading`:
            ``document_bytes`` to ``manifest``; :class:`VocabularyRequest`: ``vocab`` to
            ``pattern``; :class:`Execution`: ``batch_documents``, ``workers``, ``progress``),
            each instead of its keywords.

    Returns:
        The :class:`TokenizedCorpus`.

    Raises:
        InputError / IntegrityError: no corpus, a non-positive size, a corpus that does not match its manifest, invalid
            UTF-8 (with its file and byte offset), a bad vocabulary, or a cache that does not
            match what it should hold (delete it to rebuild; it is never rebuilt silently).
    """
    reading = settings_record(reading, CorpusReading, "reading", document_bytes=document_bytes, separator=separator,
                              text_field=text_field, on_error=on_error, manifest=manifest)
    request = settings_record(vocabulary, VocabularyRequest, "vocabulary", vocab=vocab, vocab_size=vocab_size,
                              allow_smaller_vocab=allow_smaller_vocab, min_frequency=min_frequency,
                              vocab_sample_bytes=vocab_sample_bytes, trainer=trainer, pattern=pattern)
    execution = settings_record(execution, Execution, "execution", batch_documents=batch_documents, workers=workers,
                                report=progress)
    _check_arguments(corpus=corpus, validation=validation, test=test, out=out, cache_dir=cache_dir)
    report = execution.reporter()
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = Path(corpus)
    check_exists(path)  # before its manifest and held-out ranges are looked for
    # What was not asked for is read as the corpus's manifest was cut (another size is refused).
    document_bytes, separator = reading_cut(path, document_bytes=reading.document_bytes, separator=reading.separator,
                                            manifest=reading.manifest)
    reading = replace(reading, document_bytes=document_bytes, separator=separator)
    if out is not None:
        check_output(Path(out), path, kind="pack")
    check_cache(cache, path)
    if validation or test:
        hold_out(path, validation=validation, test=test, document_bytes=document_bytes, separator=separator,
                 manifest=reading.manifest, text_field=reading.text_field, on_error=reading.on_error)
    report(PrepareProgress("hashing", 0, _size(path)))
    with reading.open(path) as source:
        if out is not None:
            check_output_unread(Path(out), source)
        return _prepare_source(source, cache, request, execution, out=None if out is None else Path(out))


def _prepare_source(source: DocumentSource, cache: Path, request: VocabularyRequest, execution: Execution, *,
                    out: Path | None = None) -> TokenizedCorpus:
    """The pack of ``source`` (read by its own cut rule) with the vocabulary ``request`` names:
    found in ``cache`` (or at ``out``) and checked, else written there."""
    report = execution.reporter()
    vocab, vocab_size, min_frequency = request.vocab, request.trained_vocab_size, request.trained_min_frequency
    record = source.record
    report(PrepareProgress("hashing", record.n_bytes, record.n_bytes))
    corpus_key = hashlib.sha256(f"{source.format}:{record.name}:{record.sha256}".encode()).hexdigest()
    if vocab is None:
        tokenizer, vocabulary_json = _trained_vocabulary(source, corpus_key, cache, request, report)
        if tokenizer.n_vocab < vocab_size and not request.allow_smaller_vocab:
            raise InputError(f"the training sample reaches only {tokenizer.n_vocab:,} ids of the "
                             f"{vocab_size:,} asked for (too few pairs occur min_frequency={min_frequency} times)", where=source.path,
                             fix=f"pass vocab_size={tokenizer.n_vocab} or less, add text (or raise "
                                 "vocab_sample_bytes), or accept fewer with allow_smaller_vocab=True")
    else:
        tokenizer = load_vocabulary(vocab, pattern=request.pattern)
        tokenizer.refuse_spelled_specials()  # before the cache keeps it: the pack's tokenizer.json could not be written
        vocabulary_json = cached_vocabulary(tokenizer, cache / "vocab" / f"user-{tokenizer.identity.short}")
    warn_spelled_special_tokens(source, list(tokenizer.special_tokens), stacklevel=3)  # encoded as text, said once
    cut = document_cut(source)
    # The error policy is part of the key: a pack that skipped bad records must never be handed
    # to a run that asked to stop at them. So is the separator: it decides every document.
    policy = "-skip" if source.on_error == "skip" else ""
    # The ranges and the text field decide what the pack holds, as the file's bytes do.
    ranges_key = _digest([_ranges_of(source), getattr(source, "text_field", None)])[:8]
    pack_dir = out or cache / "packs" / (f"{corpus_key[:16]}-{tokenizer.identity.short}-d{source.document_bytes}-r{ranges_key}"
                                         f"{_separator_key(source)}{policy}")
    with locked(pack_dir, fix=UNWRITABLE_CACHE if out is None else "make that folder writable, or write elsewhere "
                                                                        "with out=PATH"):
        if out is not None and pack_dir.is_dir() and not any(pack_dir.iterdir()):
            pack_dir.rmdir()  # an empty folder made for the pack: the pack, renamed into place, takes its place
        if pack_dir.exists():
            report(PrepareProgress("verifying", 0, record.n_bytes))
            _check_cached_pack(pack_dir, tokenizer.identity, record, cut, source, out=out is not None)
        else:
            remove_abandoned(pack_dir)
            reuse_tokenizer_json(tokenizer, cache)
            try:
                write_pack(source, tokenizer, pack_dir, execution=execution)
            except TokpackError:
                # Where flock is node-local, another node may have published this pack meanwhile:
                # its rename won. Use it once it checks out, as if it had been cached.
                if not pack_dir.exists():
                    raise
                _check_cached_pack(pack_dir, tokenizer.identity, record, cut, source, out=out is not None)
    return TokenizedCorpus(pack_dir, vocabulary_json, tokenizer=tokenizer)


def check_cache(cache: Path, corpus: Path) -> None:
    """Refuse a cache folder inside the corpus folder, where the next read of the corpus would
    take its files (packs, vocabularies) as text, unless a hidden folder holds it (a folder's
    hidden entries are not read: ``~/.cache`` for a corpus at ``~``).

    Raises:
        InputError: naming the cache and the fix.
    """
    corpus_dir, target = corpus.resolve(), cache.resolve()
    if corpus_dir.is_dir() and (target == corpus_dir or corpus_dir in target.parents) \
            and not any(part.startswith(".") for part in target.relative_to(corpus_dir).parts):
        raise InputError(f"the cache is inside the corpus folder {corpus}: its files would become training text",
                         where=cache, fix="choose a cache folder outside the corpus (cache_dir= or TOKPACK_CACHE)")


def check_output(out: Path, corpus: Path, *, kind: Literal["pack", "dataset"]) -> None:
    """Refuse ``out`` before anything is written: a folder that is, or is inside, the corpus (the
    next read of the corpus would take tokpack's files as text), or one that already holds data
    of the other kind (a pack and a sharded dataset in one folder would serve different data to
    ``Pack`` and ``PackedBatches``).

    Raises:
        InputError: naming ``out`` and the fix (said as ``out=`` for a pack, ``dataset=`` for a
            dataset: the parameter of :func:`prepare` and of :func:`~tokpack.engines.prepare_sharded`).
    """
    elsewhere = f"name a new folder with {'out' if kind == 'pack' else 'dataset'}=PATH"
    corpus_dir = corpus.resolve()
    target = out.resolve()
    if corpus_dir.is_dir() and (target == corpus_dir or corpus_dir in target.parents):
        raise InputError(f"the output is inside the corpus folder {corpus}: its files would become "
                         "training text", where=out, fix=elsewhere + " outside the corpus")
    if not target.name:
        raise InputError("is the root of the file system; tokpack writes into a folder of its own", where=out,
                         fix=elsewhere)
    if out.exists() and not out.is_dir():
        raise InputError("is a file; the output is a folder", where=out, fix=elsewhere)
    if kind == "pack" and out.is_dir() and not (out / META_FILE).exists() and not (out / DATASET_FILE).exists() \
            and any(out.iterdir()):
        raise InputError("holds other files and no pack; a pack is written into a new or empty folder (or one "
                         "holding a pack of this corpus, which is checked and used)", where=out,
                         fix=elsewhere)

    if kind == "dataset" and (out / META_FILE).exists():
        raise InputError("already a pack; a sharded dataset is written into a new or empty folder", where=out,
                         fix=elsewhere)
    if kind == "dataset" and (out / DATASET_FILE).exists() and not (out / "job.json").exists():
        raise InputError("already a dataset made otherwise; a sharded dataset is written into a new or empty "
                         "folder (or this job's, to resume it)", where=out, fix=elsewhere)
    if kind == "pack" and (out / DATASET_FILE).exists():
        raise InputError("already a sharded dataset; the output of a pack must be a new folder or a pack "
                         "of the same corpus", where=out, fix=elsewhere)


def check_output_unread(out: Path, source: DocumentSource, *, kind: Literal["pack", "dataset"] = "pack") -> None:
    """Refuse ``out`` inside a folder ``source`` reads through a link (a corpus folder's linked
    subfolder): as inside the corpus itself, the next read would take tokpack's files as text.

    Raises:
        InputError: naming ``out``, the link and the fix.
    """
    target = out.resolve()
    for link, folder in source.linked_folders().items():
        if target == folder or folder in target.parents:
            raise InputError(f"the output is inside {folder}, which the corpus reads through its link {link}: its "
                             "files would become training text", where=out,
                             fix=f"name a new folder with {'out' if kind == 'pack' else 'dataset'}=PATH outside the corpus")


def document_cut(source: DocumentSource) -> DocumentCut:
    """The cut rule a pack of ``source`` records: the newline rule at its ``document_bytes``, and
    its separator if it has one."""
    return DocumentCut(rule="newline", document_bytes=source.document_bytes, separator=source.separator)


def _separator_key(source: DocumentSource) -> str:
    """The part of a cache key that names the separator (empty without one: a corpus read
    without a separator keeps the key its cache is stored under)."""
    return f"-s{hashlib.sha256(source.separator.encode()).hexdigest()[:8]}" if source.separator else ""


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def check_held_out(validation: object, test: object) -> None:
    """Refuse held-out shares that are not shares, or leave no training data.

    Raises:
        InputError: naming ``validation`` or ``test``.
    """
    held_out = checks.probability("validation", validation) + checks.probability("test", test)
    if held_out >= 1:
        raise InputError(f"validation= and test= must leave some training data, got {held_out:g} together")


def _check_arguments(*, corpus: object, validation: object, test: object, out: object, cache_dir: object) -> None:
    """:func:`prepare`'s arguments outside its records, each checked before anything is read or written."""
    check_held_out(validation, test)
    for name, value in (("corpus", corpus), ("out", out), ("cache_dir", cache_dir)):
        if (value is not None or name == "corpus") and not isinstance(value, (str, os.PathLike)):
            raise InputError(f"{name} must be a path, got {type(value).__name__}")


#: How the trainer's sample is drawn, in the vocabulary's cache key and record: pieces of at most
#: this many bytes spread evenly over the training range's bytes (the whole range when it fits).
_SAMPLE_RULE = f"pieces-{SAMPLE_PIECE_BYTES}"


def _trained_vocabulary(source: DocumentSource, corpus_key: str, cache: Path, request: VocabularyRequest,
                        report: ProgressCallback) -> tuple[BpeTokenizer, Path]:
    """The vocabulary ``request`` trains on ``source``'s training range: from the cache when its
    key (everything that decides it) is there, else trained and published there."""
    vocab_size, min_frequency = request.trained_vocab_size, request.trained_min_frequency
    sample_bytes = request.trained_sample_bytes
    document_bytes, trainer, pattern = source.document_bytes, request.trainer, request.pattern or DEFAULT_PATTERN
    check_pattern(pattern)
    # Everything that decides the vocabulary is in its key (the exact training range included), so
    # the same request finds the same vocabulary whatever ran before, and another never does.
    train_spans = [[first, last] for name, first, last in source.unit_ranges() if name == "train"]
    settings = {"corpus": corpus_key, "vocab_size": vocab_size, "min_frequency": min_frequency,
                "sample_bytes": sample_bytes, "cut": document_cut(source).model_dump(mode="json"), "trainer": trainer,
                "pattern": pattern, "sample": _SAMPLE_RULE, "on_error": source.on_error,
                "text_field": getattr(source, "text_field", None), "training_units": train_spans,
                "training_bytes": source.range_bytes("train"),
                # The trainers cut these spellings out of the sample: a vocabulary cached by a
                # trainer that learned them as text is never found.
                "cut_out": list(TRAINED_SPECIAL_TOKENS)}
    settings_sha256 = _digest(settings)
    key = f"{corpus_key[:16]}-n{vocab_size}-{trainer}-{settings_sha256[:16]}"
    directory = cache / "vocab" / key
    trained_on: dict[str, str | int] = {
        "corpus_sha256": source.record.sha256, "vocab_size": vocab_size, "min_frequency": min_frequency,
        "sample_bytes": sample_bytes, "document_bytes": document_bytes, "trainer": trainer, "sample": _SAMPLE_RULE,
        "training_range": json.dumps({"units": train_spans, "bytes": source.range_bytes("train")}),
        "settings_sha256": settings_sha256,
    }
    if source.separator:
        trained_on["separator"] = source.separator
    with locked(directory, fix=UNWRITABLE_CACHE):
        if directory.exists():
            tokenizer = BpeTokenizer.load_saved(directory / VOCABULARY_FILE)
            saved = _saved_training(directory) or {}
            if tokenizer.pattern != pattern or {name: saved.get(name) for name in trained_on} != trained_on:
                raise InputError("cached vocabulary was trained differently; delete it to retrain", where=directory)
            return tokenizer, directory / VOCABULARY_FILE
        train = _trainer(trainer)
        sample = source.training_sample(sample_bytes)
        training = _TrainingProgress(report, min(sample_bytes, sample.range_bytes))
        texts = training.texts(sample)  # one pass: the sample counts what it gives
        first = next((text for text in texts if text), None)
        if first is not None:  # before training: a pattern that skips text would train on a part of it
            check_covers(pattern, first[:65536], source.path)
        if first is None and vocab_size > 257:  # no merges to learn: 257 ids would pass for the size asked for
            raise InputError(f"no training text to learn {vocab_size - 257} merges from (the training range "
                             "is empty)", where=source.path, fix="give a corpus with text, or a vocabulary with vocab=")
        # The trainers count ranks (the bytes and merges); <|endoftext|> is the one id after them.
        with training.compiling_said(trainer):
            tokenizer = train(itertools.chain([first] if first else [], texts), vocab_size=vocab_size - 1,
                              min_frequency=min_frequency, pattern=pattern)
        training.finished()
        source.check_unchanged()
        # What was sampled is kept with the vocabulary, so a rerun from the cache can say it too.
        trained_on |= {"sample_documents": sample.n_documents, "sample_bytes_used": sample.n_bytes,
                       "training_range_bytes": sample.range_bytes}
        if sample.spans is not None:
            trained_on |= {"sample_pieces": sample.n_pieces, "sample_piece_bytes": sample.piece_bytes}
        remove_abandoned(directory)
        if _published(directory, lambda temporary: tokenizer.write_files(temporary, trained_on=trained_on)):
            if _saved_training(directory) != trained_on or BpeTokenizer.load_saved(directory / VOCABULARY_FILE).identity != tokenizer.identity:
                raise IntegrityError("another process published a different vocabulary here; delete it", where=directory)
    return tokenizer, directory / VOCABULARY_FILE


#: Trainers whose kernels numba compiles on a first run (then caches).
_COMPILED_TRAINERS = frozenset({"exact"})


class _TrainingProgress:
    """The training stage's reports: the sample's bytes read so far out of ``total`` (the bytes it
    will read: the training range, or the sample's cap below it), about every hundredth of it, and
    while numba compiles the trainer's kernels (tens of seconds, once), that it does. Reports may
    come from the trainer's threads, one at a time."""

    def __init__(self, report: ProgressCallback, total: int) -> None:
        self.report, self.total = report, total
        self.done = 0
        self.compiling = False
        self.step = max(total // 100, 1 << 16)
        self.say()

    def say(self) -> None:
        self.report(PrepareProgress("training", min(self.done, self.total), self.total, compiling=self.compiling))

    def texts(self, sample: TrainingSample) -> Iterator[str]:
        """``sample``'s texts, said as they are read (it counts its bytes as it gives them)."""
        for text in sample:
            if sample.n_bytes - self.done >= self.step:
                self.done = sample.n_bytes
                self.say()
            yield text
        self.done = sample.n_bytes
        self.say()

    @contextlib.contextmanager
    def compiling_said(self, trainer: str) -> Iterator[None]:
        if trainer not in _COMPILED_TRAINERS:  # numba is not loaded for the others
            yield
            return
        from tokpack._kernels import compiling_said

        def said(compiling: bool) -> None:
            self.compiling = compiling
            self.say()

        with compiling_said(said):
            yield

    def finished(self) -> None:
        self.done, self.compiling = self.total, False
        self.say()


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _ranges_of(source: DocumentSource) -> list[list[object]]:
    return [[name, first, last, source.range_bytes(name)] for name, first, last in source.unit_ranges()]


def _published(directory: Path, write: Callable[[Path], object]) -> bool:
    """Build ``directory`` with ``write``; return ``True`` when another process (on a node whose
    lock this one could not see) published it first, so the caller checks theirs instead."""
    try:
        with building(directory) as temporary:
            write(temporary)
    except TokpackError:
        if not directory.exists():
            raise
        return True
    return False


def _train_exact(*args: object, **kwargs: object) -> BpeTokenizer:
    from tokpack.bpe import train_bytelevel  # imported when used: the hf path does not need it

    return train_bytelevel(*args, **kwargs)  # type: ignore[arg-type]


#: Vocabulary trainers by name (``prepare(trainer=...)``): one line adds one.
TRAINERS: dict[str, Callable[..., BpeTokenizer]] = {"exact": _train_exact, "hf": train_hf_bytelevel}


def _trainer(name: Trainer) -> Callable[..., BpeTokenizer]:
    if name not in TRAINERS:
        raise InputError(f"trainer must be one of {', '.join(TRAINERS)}, got {name!r}")
    return TRAINERS[name]


def _saved_training(directory: Path) -> dict[str, str | int] | None:
    from tokpack._schema import read_record
    from tokpack.vocab.bytelevel import VocabularyRecord

    return read_record(VocabularyRecord, directory / VOCABULARY_FILE).trained_on


def cached_vocabulary(tokenizer: BpeTokenizer, directory: Path) -> Path:
    """Save ``tokenizer`` under ``directory`` once (atomically); return its ``vocabulary.json``.

    Raises:
        IntegrityError: ``directory`` holds another vocabulary.
    """
    with locked(directory, fix=UNWRITABLE_CACHE):
        if directory.exists():
            # Compared through its record and the rank file's bytes: parsing it again would cost
            # as much as loading the vocabulary did.
            from tokpack._schema import read_record
            from tokpack.vocab.bytelevel import VocabularyRecord

            record = read_record(VocabularyRecord, directory / VOCABULARY_FILE)
            ranks = directory / record.ranks_file
            same = (record.identity == tokenizer.identity and record.pattern == tokenizer.pattern
                    and ranks.is_file() and ranks.read_bytes() == tokenizer.rank_lines)
            if not same:
                raise IntegrityError("cached vocabulary differs from the one given", where=directory, fix="delete it")
        else:
            remove_abandoned(directory)
            if _published(directory, tokenizer.write_files) and \
                    BpeTokenizer.load_saved(directory / VOCABULARY_FILE).identity != tokenizer.identity:
                raise IntegrityError("another process published a different vocabulary here; delete it", where=directory)
    return directory / VOCABULARY_FILE


def _batches(pieces: Iterator[Piece | Utf8Piece], size: int) -> Iterator[list[Piece | Utf8Piece]]:
    while batch := list(islice(pieces, size)):
        yield batch


#: Text encoded between two returns of freed memory to the system (:func:`return_freed_memory`):
#: without them glibc's main arena grows with the corpus; returning after every batch lowers the
#: peak a little for more CPU in page faults (BENCHMARKS.md, "prepare's peak memory").
_TRIM_BYTES = 64 << 20


def write_pack(
    source: DocumentSource, tokenizer: BpeTokenizer, pack_dir: Path, *, first_unit: int = 0,
    last_unit: int | None = None, execution: Execution = Execution(), shard: ShardPlace | None = None,
) -> None:
    """Encode units ``[first_unit, last_unit)`` of ``source`` into a new pack at ``pack_dir``,
    with the vocabulary's files (made from ``tokenizer``: they depend on the vocabulary alone, so
    a pack is the same whether its vocabulary was trained here or given, and being made from it,
    they are not read back to check; its ``tokenizer.json`` derived here, or given to it from the
    cache by :func:`~tokpack.vocab.tokenizer_json_cache.reuse_tokenizer_json`, which checks that
    copy); ``shard``: the place of a sharded job's shard, recorded in its ``meta.json``.

    Documents are encoded in batches of ``execution.batch_documents`` on
    :meth:`execution.threads <tokpack.preparing.options.Execution.threads>` threads and written in
    input order, so the bytes do not depend on the number of workers. A document read from a file
    reaches the encoder as its bytes (:meth:`~tokpack.corpus.sources.DocumentSource.utf8_pieces`),
    which the encoder checks as UTF-8; one that is not gets the error reading it as text gives.
    """
    from tokpack.vocab.compiled import utf8_characters  # (with the encoder, which prepare loads anyway)

    last_unit = source.n_units if last_unit is None else last_unit
    record, report = source.record, execution.reporter()
    # The text this pack encodes, for how many threads encode it: the input's bytes, a shard's
    # share of them by its units (an estimate where units differ in size).
    threads = execution.threads(record.n_bytes * (last_unit - first_unit) // max(source.n_units, 1))
    done_bytes = characters = 0
    # Skips are counted for this pass only: the trainer's sample may have read (and skipped) the
    # same bad records already, and meta.json must not depend on whether the vocabulary was cached.
    skipped_before = source.skipped

    def ids_of(batch: list[Piece | Utf8Piece], ahead: _Ahead) -> list[np.ndarray]:
        try:
            return ahead.result()
        except UnicodeDecodeError:
            pass
        for piece in batch:  # the first document that is not UTF-8 raises what reading it as text raises
            if isinstance(piece, Utf8Piece):
                source.decoded(piece)
        raise AssertionError("the encoder refused UTF-8 that Python decodes")  # pragma: no cover

    def encoded(batches: Iterator[list[Piece | Utf8Piece]]) -> Iterator[tuple[list[Piece | Utf8Piece], list[np.ndarray]]]:
        # The next batch is read and encoded while this one is written and hashed: the encoder's
        # threads never wait for the writer. Batches still come out in input order.
        waiting: tuple[list[Piece | Utf8Piece], _Ahead] | None = None
        coming: tuple[list[Piece | Utf8Piece], _Ahead] | None = None
        try:
            for batch in batches:
                coming = (batch, _Ahead(partial(tokenizer.encode_arrays, [_text(piece) for piece in batch],
                                                num_threads=threads)))
                if waiting is not None:
                    yield waiting[0], ids_of(*waiting)
                waiting, coming = coming, None
            if waiting is not None:
                yield waiting[0], ids_of(*waiting)
        finally:  # as an executor leaving its block: no encoding outlives the pass that asked for it
            for started in (waiting, coming):
                if started is not None:
                    started[1].wait()

    def document_name(before: int, number: int) -> str:
        """How an error names document ``before + number`` of this pack (a shard counts its own)."""
        at = before + number
        if first_unit == 0 and last_unit == source.n_units:
            return "the first document" if at == 0 else f"document {at:,} (counting from 0)"
        return (f"document {at:,} (counting from 0) of the shard of units {first_unit:,} to {last_unit - 1:,} "
                "(files, records or rows, as the format counts them)")

    with PackWriter(pack_dir, vocabulary=tokenizer.identity, origins=(source.origin_kind, source.origin_files())) as writer:
        writer.add_vocabulary(tokenizer)
        ranges = {}
        for name, first, last in source.unit_ranges():
            first_doc, first_token = writer.n_docs, writer.n_tokens
            low, high = max(first, first_unit), min(last, last_unit)
            for batch, ids in encoded(_batches(source.utf8_pieces(low, high), execution.batch_documents)) if low < high else ():
                sizes = [piece.n_bytes for piece in batch]
                tokenizer.check_spelled([_text(piece) for piece in batch], ids, sizes, where=source.path,
                                        document_name=partial(document_name, writer.n_docs))
                writer.add_documents(ids, origins=[piece.origin for piece in batch])
                batch_bytes = sum(sizes)
                if (done_bytes + batch_bytes) // _TRIM_BYTES > done_bytes // _TRIM_BYTES:
                    return_freed_memory()
                done_bytes += batch_bytes
                characters += sum(len(piece.text) if isinstance(piece, Piece) else utf8_characters(piece.data)
                                  for piece in batch)
                report(PrepareProgress("encoding", done_bytes, record.n_bytes, writer.n_tokens, writer.n_docs))
            whole = first_unit <= first and last <= last_unit
            if low < high or whole:
                ranges[name] = Span(documents=(first_doc, writer.n_docs), tokens=(first_token, writer.n_tokens),
                                    source_bytes=source.range_bytes(name) if whole else None)
        # Characters are counted here, where the text is at hand, so nobody reads the corpus again
        # to tell characters per token.
        source.check_unchanged()  # the bytes encoded must be the bytes the record's hash names
        skipped = source.skipped - skipped_before
        if skipped and not writer.n_docs and first_unit == 0 and last_unit == source.n_units:
            # A pack of nothing but skips is never what was asked for: refuse instead of exit 0.
            first_problem = source.problems[0] if source.problems else "unreadable"
            raise InputError(f"on_error='skip' skipped every file or record ({skipped:,}), "
                             f"leaving no document; the first: {first_problem}", where=source.path,
                             fix="fix these inputs, or give the text they hold")
        counts = {"characters": characters} | ({"skipped": skipped} if skipped else {})
        # Stamped as verified: the checksums are of the bytes just written, so the pack's first
        # open (prepare's own, next) does not read and hash them again.
        writer.commit(source=record, cut=document_cut(source),
                      ranges=ranges, counts=counts, pad_id=tokenizer.eot_id, stamp_verified=True, shard=shard)
        if skipped and shard is None:  # the pack counts them; the user needs their names to fix them
            warnings.warn(InputsSkipped(skipped, source.problems[:3]), stacklevel=2)


def _text(piece: Piece | Utf8Piece) -> str | bytes:
    """What the encoder takes of ``piece``: its text, or the bytes it was read as."""
    return piece.text if isinstance(piece, Piece) else piece.data


class _Ahead:
    """``call()`` run on a thread of its own from now on; :meth:`result` waits for it and gives
    what it returned, or raises what it raised. What a one-thread executor's ``submit`` gives
    :func:`write_pack`, without importing ``concurrent.futures`` (and ``logging`` with it) into
    every ``prepare``.

    >>> _Ahead(lambda: 6 * 7).result()
    42
    >>> _Ahead(lambda: 1 // 0).result()
    Traceback (most recent call last):
    ...
    ZeroDivisionError: integer division or modulo by zero
    """

    def __init__(self, call: Callable[[], list[np.ndarray]]) -> None:
        self._call = call
        self._outcome: tuple[list[np.ndarray] | None, BaseException | None] = (None, None)
        self._thread = threading.Thread(target=self._run, name="tokpack-encode")
        self._thread.start()

    def _run(self) -> None:
        try:
            self._outcome = (self._call(), None)
        except BaseException as error:  # handed to the caller of result(), as a Future does
            self._outcome = (None, error)

    def wait(self) -> None:
        """Until the call has returned or raised."""
        self._thread.join()

    def result(self) -> list[np.ndarray]:
        """What the call returned.

        Raises:
            BaseException: what the call raised.
        """
        self.wait()
        value, error = self._outcome
        if error is not None:
            raise error
        assert value is not None
        return value


def _check_cached_pack(pack_dir: Path, identity: VocabIdentity, record: Source, cut: DocumentCut,
                       source: DocumentSource, *, out: bool = False) -> None:
    """Refuse a pack already at ``pack_dir`` that is not the one this run would write: in the
    cache, an integrity error; at the ``out`` folder the user named, a pack made with other
    settings (which ones, said), to delete or write elsewhere."""
    meta = Pack(pack_dir).meta  # verified on its first open, and again whenever a file of it changed
    differences = []
    if meta.vocabulary != identity:
        differences.append(f"vocabulary {meta.vocabulary.sha256[:12]}… ({meta.vocabulary.n_vocab:,} ids), "
                           f"this run's {identity.sha256[:12]}… ({identity.n_vocab:,} ids)")
    if meta.source != record:
        differences.append(f"corpus {meta.source.name} ({meta.source.sha256[:12]}…), "
                           f"this run's {record.name} ({record.sha256[:12]}…)")
    if meta.cut != cut:
        made = meta.cut
        differences.append(f"document cut {made.document_bytes} bytes{'' if made.separator is None else ' at ' + repr(made.separator)}, "
                           f"this run's {cut.document_bytes}{'' if cut.separator is None else ' at ' + repr(cut.separator)}")
    ranges = {name: span.source_bytes for name, span in meta.ranges.items()}
    if ranges != {name: source.range_bytes(name) for name, _, _ in source.unit_ranges()}:
        differences.append(f"ranges {ranges}, this run's "
                           f"{ {name: source.range_bytes(name) for name, _, _ in source.unit_ranges()} }")
    if not differences:
        return
    if out:
        raise InputError(f"holds a pack made with other settings ({'; '.join(differences)})", where=pack_dir,
                         fix="delete it, or write elsewhere with out=PATH")
    raise IntegrityError(f"cached pack does not match this corpus ({'; '.join(differences)}); delete it to rebuild",
                         where=pack_dir)
