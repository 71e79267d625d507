"""``prepare_sharded()``: start (or resume) a sharded job and run it on an engine."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from tokpack import _checks as checks
from tokpack._words import counted
from tokpack.corpus.sources import OnError, hold_out, open_corpus, warn_spelled_special_tokens
from tokpack.engines.encoders import ENCODER_FILE
from tokpack.engines.executors import EXECUTORS, ProgressSink, RunOptions, ShardTask
from tokpack.engines.lifecycle import JOB_FILE, finish_job, read_job, run_shard, write_job
from tokpack.engines.text_job import ShardJob, check_pins
from tokpack.errors import InputError
from tokpack.preparing.options import CorpusReading, Execution, VocabularyRequest, settings_record
from tokpack.preparing.preparation import check_held_out, check_output, check_output_unread
from tokpack.store.dataset import SHARD_PREFIX, ShardedDataset
from tokpack.store.format import DATASET_FILE
from tokpack.vocab.loading import VocabularySpec, load_vocabulary

Engine = str  # a name in tokpack.engines.executors.EXECUTORS


#: The longest document of a sharded job unless told (``reading.document_bytes``).
DOCUMENT_BYTES = 1_048_576


def start_job(corpus: str | Path, dataset: str | Path, *, shards: int, vocab: VocabularySpec | None = None,
              document_bytes: int | None = None, batch_documents: int = 16, text_field: str = "text",
              on_error: OnError = "raise", separator: str | None = None, manifest: str | Path | None = None,
              validation: float = 0.0, test: float = 0.0, reading: CorpusReading | None = None,
              vocabulary: VocabularyRequest | None = None, execution: Execution | None = None) -> ShardJob:
    """Write ``job.json`` and ``encoder.json`` into ``dataset`` (or check the ones there).

    The settings are :func:`tokpack.prepare`'s records (``reading``, ``vocabulary``: a given
    ``vocab``, and for a bare rank file its ``pattern``; ``execution``: its ``batch_documents``),
    or their fields as keywords: every shard cuts the input by the same rule, and a text file by
    the same manifest. ``document_bytes`` is :data:`DOCUMENT_BYTES` unless given. ``validation``
    and ``test`` hold out shares as :func:`tokpack.prepare` does (the corpus's manifest is written
    before any shard reads it).

    Raises:
        InputError: no ``vocab``; ``dataset`` holds another job (other input, vocabulary or settings).
    """
    reading, request, execution = _records(reading, vocabulary, execution, vocab=vocab, document_bytes=document_bytes,
                                           batch_documents=batch_documents, text_field=text_field, on_error=on_error,
                                           separator=separator, manifest=manifest)
    return _start(corpus, Path(dataset), shards, reading, request, execution, validation=validation, test=test)


def _records(reading: CorpusReading | None, vocabulary: VocabularyRequest | None, execution: Execution | None,
             **flat: Any) -> tuple[CorpusReading, VocabularyRequest, Execution]:
    """The three records of a sharded job's settings, from the records given or the flat keywords.

    Raises:
        InputError: a setting given both ways or out of range, or no vocabulary given.
    """
    reading = settings_record(reading, CorpusReading, "reading", document_bytes=flat["document_bytes"],
                              separator=flat["separator"], text_field=flat["text_field"], on_error=flat["on_error"],
                              manifest=flat["manifest"])
    request = settings_record(vocabulary, VocabularyRequest, "vocabulary", vocab=flat["vocab"])
    execution = settings_record(execution, Execution, "execution", batch_documents=flat["batch_documents"])
    if request.vocab is None and vocabulary is not None:  # the record's field is what is missing
        raise InputError("vocabulary.vocab is None: a sharded job does not train a vocabulary (every shard must "
                         "share one)", fix="give it as vocabulary=VocabularyRequest(vocab=PATH); train one first "
                                           "with tokpack.prepare or tokpack tokenizer train")
    if request.vocab is None:
        raise InputError("a sharded job needs vocab= (every shard must share one vocabulary)",
                         fix="train one first with tokpack.prepare or tokpack tokenizer train, and pass it as vocab=")
    return reading, request, execution


def _start(corpus: str | Path, dataset: Path, shards: int, reading: CorpusReading, request: VocabularyRequest,
           execution: Execution, *, validation: float, test: float) -> ShardJob:
    """:func:`start_job` once its settings are records."""
    check_held_out(validation, test)
    document_bytes = DOCUMENT_BYTES if reading.document_bytes is None else reading.document_bytes
    text_field, on_error, separator, manifest = reading.text_field, reading.on_error, reading.separator, reading.manifest
    batch_documents = execution.batch_documents
    dataset = Path(dataset)
    shards = checks.positive_int("shards", shards, what="at least 1")
    check_output(dataset, Path(corpus), kind="dataset")
    if dataset.is_dir() and not (dataset / JOB_FILE).exists() and (others := _not_a_jobs(dataset)):
        raise InputError(f"holds other files ({', '.join(others[:3])}{', …' if len(others) > 3 else ''}); a "
                         "sharded job is written into a new or empty folder (or its own, to resume it)", where=dataset,
                         fix="name a new folder (dataset=PATH)")
    assert request.vocab is not None  # _records refuses a request without one
    tokenizer = load_vocabulary(request.vocab, pattern=request.pattern)
    tokenizer.refuse_spelled_specials()  # its tokenizer.json, carried by every shard, could not be written
    if validation or test:  # the same split as prepare's, written before any shard reads the corpus
        hold_out(corpus, validation=validation, test=test, document_bytes=document_bytes, separator=separator,
                 manifest=manifest, text_field=text_field, on_error=on_error)
    with open_corpus(corpus, document_bytes=document_bytes, on_error=on_error, text_field=text_field,
                     separator=separator, manifest=manifest) as source:
        check_output_unread(dataset, source)
        kind, record, units, pins = source.format, source.record, source.n_units, source.pins()
        warn_spelled_special_tokens(source, list(tokenizer.special_tokens), stacklevel=3)
    # Shards are cut on input units (documents, lines, records); more shards than units only adds
    # empty ones, which a job may have, but never more than the corpus has bytes: an absurd count
    # would exhaust memory listing them.
    checks.positive_int("shards", shards, high=max(1, record.n_bytes),
                        fix=f"{corpus} has {counted(record.n_bytes, 'byte')} in {counted(units, 'input unit')}; use at "
                            f"most {counted(max(1, units), 'shard')} to leave none empty")
    # Absolute, but links kept: every task reads the corpus, and finds its manifest, where this did.
    job = ShardJob(corpus=os.path.abspath(corpus), format=kind, source=record,
                   text_field=text_field, on_error=on_error, document_bytes=document_bytes,
                   batch_documents=batch_documents, world_size=shards, vocabulary=tokenizer.identity,
                   separator=separator, manifest=None if manifest is None else os.path.abspath(manifest),
                   pins=pins).sealed()
    try:
        dataset.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"cannot create the folder ({error.strerror or error})", where=dataset,
                         fix="name a folder you can write (dataset=PATH)") from None

    def resume(folder: Path) -> ShardJob:
        existing = read_job(ShardJob, folder)
        if existing.model_copy(update={"corpus": job.corpus}).sealed() != job:
            if existing.model_copy(update={"corpus": job.corpus, "pins": pins, "source": record}).sealed() == job:
                check_pins(existing, pins, record)  # this job, whose inputs changed: says which
            raise InputError("another job is in this folder; use a new one", where=folder / JOB_FILE)
        return existing

    return write_job(dataset, job, tokenizer, resume=resume)


def _check_execution(engine: Engine, *, processes: int | None, ray_address: str | None, ray_cpus: int | None,
                     retries: int) -> None:
    """Refuse :func:`prepare_sharded`'s execution settings out of range, or Ray's beside another
    engine (which would ignore them), before anything is written.

    Raises:
        InputError: naming the setting.
    """
    if processes is not None:
        checks.positive_int("processes", processes, what="at least 1", fix="omit it for one per core")
    checks.non_negative_int("retries", retries)
    for name, value in (("ray_address", ray_address), ("ray_cpus", ray_cpus)):
        if value is not None and engine != "ray":
            raise InputError(f"{name} is for engine='ray'; engine={engine!r} would ignore it",
                             fix=f"drop {name}, or pass engine='ray'")
    if ray_cpus is not None:
        checks.positive_int("ray_cpus", ray_cpus, what="at least 1", fix="omit it for every core")
    if ray_address is not None and not isinstance(ray_address, str):
        raise InputError(f"ray_address must be HOST:PORT or auto, got {type(ray_address).__name__}")


def _not_a_jobs(folder: Path) -> list[str]:
    """The names in ``folder`` that a sharded job does not write (its records, shards, markers,
    locks and hidden temporaries aside), sorted."""
    def a_jobs(name: str) -> bool:
        return name.startswith((".", SHARD_PREFIX)) or name.endswith(".lock") or name in (ENCODER_FILE, JOB_FILE, DATASET_FILE)

    return sorted(name for name in os.listdir(folder) if not a_jobs(name))


def prepare_sharded(corpus: str | Path, dataset: str | Path, *, shards: int, vocab: VocabularySpec | None = None,
                    engine: Engine = "local", processes: int | None = None, ray_address: str | None = None,
                    ray_cpus: int | None = None, retries: int = 2, document_bytes: int | None = None,
                    batch_documents: int = 16, text_field: str = "text", on_error: OnError = "raise",
                    separator: str | None = None, manifest: str | Path | None = None, validation: float = 0.0,
                    test: float = 0.0, reading: CorpusReading | None = None, vocabulary: VocabularyRequest | None = None,
                    execution: Execution | None = None, task: ShardTask = run_shard,
                    on_done: Callable[[int], None] | None = None,
                    on_progress: ProgressSink | None = None) -> ShardedDataset:
    """Pack ``corpus`` into ``shards`` shards under ``dataset`` with ``engine`` and return the dataset.

    The settings are :func:`tokpack.prepare`'s records, or their fields as keywords (see
    :func:`start_job`); ``execution.workers`` is the threads each shard encodes with (by default
    every core, one for a shard of less than 16 MiB of text), and ``processes`` the shards run at once. A rerun skips complete shards, so an
    interrupted job resumes where it stopped. ``on_progress(rank, bytes, ids, documents)`` hears
    from every worker as it writes; ``on_done(rank)`` when a shard is complete. The shards are
    byte-identical whichever engine ran them. A vocabulary is required: every shard must use the
    same one (train it first with :func:`tokpack.prepare` or ``tokpack tokenizer train``).

    Raises:
        InputError: bad input, or ``dataset`` holding another job.
        RuntimeError: a shard failing after its retries.
    """
    dataset = Path(dataset)
    if engine not in EXECUTORS:  # before any file is written
        raise InputError(f"engine must be one of {', '.join(EXECUTORS)}, got {engine!r}")
    _check_execution(engine, processes=processes, ray_address=ray_address, ray_cpus=ray_cpus, retries=retries)
    reading, request, execution = _records(reading, vocabulary, execution, vocab=vocab, document_bytes=document_bytes,
                                           batch_documents=batch_documents, text_field=text_field, on_error=on_error,
                                           separator=separator, manifest=manifest)
    if execution.report is not None:
        raise InputError("execution.report is not heard by a sharded job; its workers report to on_progress",
                         fix="pass on_progress=function(rank, bytes, ids, documents) instead")
    _start(corpus, dataset, shards, reading, request, execution, validation=validation, test=test)
    if execution.workers is not None:
        task = partial(task, workers=execution.workers)
    options = RunOptions(processes=processes, address=ray_address, cpus=ray_cpus, retries=retries, task=task,
                         on_done=on_done, on_progress=on_progress)
    EXECUTORS[engine](dataset, list(range(shards)), options)
    finished = finish_job(dataset)
    if finished is None:
        raise InputError("not every shard is complete", where=dataset, fix="rerun to resume")
    return finished
