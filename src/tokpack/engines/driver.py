"""``prepare_sharded()``: start (or resume) a sharded job and run it on an engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from tokpack._atomic import building
from tokpack._schema import read_record, write_record
from tokpack.corpus.cache import locked
from tokpack.corpus.sources import OnError, open_source
from tokpack.engines.executors import ProgressSink, ShardTask, run_local, run_ray
from tokpack.engines.shard_task import JOB_FILE, VOCABULARY_DIR, ShardJob, finish_if_complete, run_shard
from tokpack.errors import InputError, TokpackError
from tokpack.store.dataset import ShardedDataset
from tokpack.vocab.bytelevel import BpeTokenizer
from tokpack.vocab.loading import VocabularySpec, load_vocabulary

Engine = Literal["local", "ray"]


def start_job(corpus: str | Path, dataset: str | Path, *, vocab: VocabularySpec, shards: int,
              document_bytes: int = 1_048_576, batch_documents: int = 16, text_field: str = "text",
              on_error: OnError = "raise") -> ShardJob:
    """Write ``job.json`` and the vocabulary into ``dataset`` (or check the ones there).

    Raises:
        ValueError: ``dataset`` holds another job (other input, vocabulary or settings).
    """
    dataset = Path(dataset)
    if shards < 1:
        raise InputError(f"shards must be at least 1, got {shards}")
    tokenizer = load_vocabulary(vocab)
    with open_source(corpus, document_bytes=document_bytes, on_error=on_error, text_field=text_field) as source:
        kind, record = source.format, source.record
    job = ShardJob(corpus=str(Path(corpus).resolve()), format=kind, source=record,
                   text_field=text_field, on_error=on_error, document_bytes=document_bytes,
                   batch_documents=batch_documents, world_size=shards, vocabulary=tokenizer.identity)
    dataset.mkdir(parents=True, exist_ok=True)
    with locked(dataset / JOB_FILE):
        if (dataset / JOB_FILE).exists():
            existing = read_record(ShardJob, dataset / JOB_FILE)
            if existing.model_copy(update={"corpus": job.corpus}) != job:
                raise InputError(f"{dataset / JOB_FILE}: another job is in this folder; use a new one")
            return existing
        vocabulary_dir = dataset / VOCABULARY_DIR
        if not vocabulary_dir.exists():
            try:
                with building(vocabulary_dir) as temporary:
                    tokenizer.save(temporary)
            except TokpackError:  # another node's rename won (flock may be node-local): checked below
                if not vocabulary_dir.exists():
                    raise
        if BpeTokenizer.load_saved(vocabulary_dir / "vocabulary.json").identity != tokenizer.identity:
            raise InputError(f"{vocabulary_dir}: another vocabulary is in this folder")
        write_record(job, dataset / JOB_FILE)
    return job


def prepare_sharded(corpus: str | Path, dataset: str | Path, *, vocab: VocabularySpec, shards: int,
                    engine: Engine = "local", processes: int | None = None, ray_address: str | None = None,
                    ray_cpus: int | None = None, retries: int = 2, document_bytes: int = 1_048_576,
                    batch_documents: int = 16, text_field: str = "text", on_error: OnError = "raise",
                    task: ShardTask = run_shard, on_done: Callable[[int], None] | None = None,
                    on_progress: ProgressSink | None = None) -> ShardedDataset:
    """Pack ``corpus`` into ``shards`` shards under ``dataset`` with ``engine`` and return the dataset.

    A rerun skips complete shards, so an interrupted job resumes where it stopped.
    ``on_progress(rank, bytes, ids, documents)`` hears from every worker as it writes; ``on_done(rank)``
    when a shard is complete. The shards
    are byte-identical whichever engine ran them. A vocabulary is required: every shard must
    use the same one (train it first with :func:`tokpack.prepare` or ``tokpack tokenizer train``).

    Raises:
        ValueError: bad input, or ``dataset`` holding another job.
        RuntimeError: a shard failing after its retries.
    """
    dataset = Path(dataset)
    start_job(corpus, dataset, vocab=vocab, shards=shards, document_bytes=document_bytes,
              batch_documents=batch_documents, text_field=text_field, on_error=on_error)
    ranks = list(range(shards))
    if engine == "local":
        run_local(dataset, ranks, processes=processes, retries=retries, task=task, on_done=on_done,
                  on_progress=on_progress)
    elif engine == "ray":
        run_ray(dataset, ranks, address=ray_address, retries=retries, task=task, num_cpus=ray_cpus, on_done=on_done,
                on_progress=on_progress)
    else:
        raise InputError(f"engine must be 'local' or 'ray', got {engine!r}")
    finished = finish_if_complete(dataset)
    if finished is None:
        raise RuntimeError(f"{dataset}: not every shard is complete")
    return finished
