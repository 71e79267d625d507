"""``prepare_sharded()``: start (or resume) a sharded job and run it on an engine."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tokpack import _checks as checks
from tokpack.corpus.sources import OnError, open_corpus, warn_spelled_special_tokens
from tokpack.engines.encoders import ENCODER_FILE
from tokpack.engines.executors import EXECUTORS, ProgressSink, RunOptions, ShardTask
from tokpack.engines.lifecycle import JOB_FILE, finish_job, read_job, run_shard, write_job
from tokpack.engines.text_job import ShardJob, check_pins
from tokpack.errors import InputError
from tokpack.preparing.preparation import check_output, check_output_unread
from tokpack.store.dataset import SHARD_PREFIX, ShardedDataset
from tokpack.store.format import DATASET_FILE
from tokpack.vocab.loading import VocabularySpec, load_vocabulary

Engine = str  # a name in tokpack.engines.executors.EXECUTORS


def start_job(corpus: str | Path, dataset: str | Path, *, vocab: VocabularySpec, shards: int,
              document_bytes: int = 1_048_576, batch_documents: int = 16, text_field: str = "text",
              on_error: OnError = "raise", separator: str | None = None, manifest: str | Path | None = None) -> ShardJob:
    """Write ``job.json`` and ``encoder.json`` into ``dataset`` (or check the ones there).

    ``separator`` and ``manifest`` are :func:`tokpack.prepare`'s: every shard cuts the input by
    the same rule, and a text file by the same manifest.

    Raises:
        InputError: ``dataset`` holds another job (other input, vocabulary or settings).
    """
    dataset = Path(dataset)
    shards = checks.positive_int("shards", shards)
    check_output(dataset, Path(corpus), kind="dataset")
    if dataset.is_dir() and not (dataset / JOB_FILE).exists() and (others := _not_a_jobs(dataset)):
        raise InputError(f"holds other files ({', '.join(others[:3])}{', …' if len(others) > 3 else ''}); a "
                         "sharded job is written into a new or empty folder (or its own, to resume it)", where=dataset,
                         fix="name a new folder (dataset=PATH)")
    tokenizer = load_vocabulary(vocab)
    with open_corpus(corpus, document_bytes=document_bytes, on_error=on_error, text_field=text_field,
                     separator=separator, manifest=manifest) as source:
        check_output_unread(dataset, source)
        kind, record, units, pins = source.format, source.record, source.n_units, source.pins()
        warn_spelled_special_tokens(source, list(tokenizer.special_tokens), stacklevel=3)
    # Shards are cut on input units (documents, lines, records); more shards than units only adds
    # empty ones, which a job may have, but never more than the corpus has bytes: an absurd count
    # would exhaust memory listing them.
    checks.positive_int("shards", shards, high=max(1, record.n_bytes),
                        fix=f"{corpus} has {record.n_bytes:,} bytes in {units:,} input units; use at most "
                            f"{max(1, units):,} shards to leave none empty")
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


def _not_a_jobs(folder: Path) -> list[str]:
    """The names in ``folder`` that a sharded job does not write (its records, shards, markers,
    locks and hidden temporaries aside), sorted."""
    def a_jobs(name: str) -> bool:
        return name.startswith((".", SHARD_PREFIX)) or name.endswith(".lock") or name in (ENCODER_FILE, JOB_FILE, DATASET_FILE)

    return sorted(name for name in os.listdir(folder) if not a_jobs(name))


def prepare_sharded(corpus: str | Path, dataset: str | Path, *, vocab: VocabularySpec, shards: int,
                    engine: Engine = "local", processes: int | None = None, ray_address: str | None = None,
                    ray_cpus: int | None = None, retries: int = 2, document_bytes: int = 1_048_576,
                    batch_documents: int = 16, text_field: str = "text", on_error: OnError = "raise",
                    separator: str | None = None, manifest: str | Path | None = None, task: ShardTask = run_shard, on_done: Callable[[int], None] | None = None,
                    on_progress: ProgressSink | None = None) -> ShardedDataset:
    """Pack ``corpus`` into ``shards`` shards under ``dataset`` with ``engine`` and return the dataset.

    A rerun skips complete shards, so an interrupted job resumes where it stopped.
    ``on_progress(rank, bytes, ids, documents)`` hears from every worker as it writes; ``on_done(rank)``
    when a shard is complete. The shards
    are byte-identical whichever engine ran them. A vocabulary is required: every shard must
    use the same one (train it first with :func:`tokpack.prepare` or ``tokpack tokenizer train``).

    Raises:
        InputError: bad input, or ``dataset`` holding another job.
        RuntimeError: a shard failing after its retries.
    """
    dataset = Path(dataset)
    if engine not in EXECUTORS:  # before any file is written
        raise InputError(f"engine must be one of {', '.join(EXECUTORS)}, got {engine!r}")
    start_job(corpus, dataset, vocab=vocab, shards=shards, document_bytes=document_bytes,
              batch_documents=batch_documents, text_field=text_field, on_error=on_error, separator=separator,
              manifest=manifest)
    options = RunOptions(processes=processes, address=ray_address, cpus=ray_cpus, retries=retries, task=task,
                         on_done=on_done, on_progress=on_progress)
    EXECUTORS[engine](dataset, list(range(shards)), options)
    finished = finish_job(dataset)
    if finished is None:
        raise InputError("not every shard is complete", where=dataset, fix="rerun to resume")
    return finished
