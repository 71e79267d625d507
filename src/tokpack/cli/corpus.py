"""``tokpack prepare``, ``inspect`` and ``demo``: the text corpus commands."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from tokpack._lazy import when_imported
from tokpack.cli._console import (
    EngineName,
    OnErrorName,
    StorageOptions,
    TrainerName,
    command_group,
    prepare_progress,
    print_line,
    print_summary,
    shard_progress,
    stderr,
    stdout,
    storage_options_from,
)
from tokpack.errors import InputError

if TYPE_CHECKING:  # the library is imported by the commands that use it, not by every --help
    from tokpack.preparing import CorpusReading, TokenizedCorpus, VocabularyRequest
    from tokpack.store import TokenSource
    from tokpack.store.format import PackMeta
    from tokpack.vocab import BpeTokenizer

VocabOption = typer.Option(None, "--vocab", help="Your vocabulary: a rank file, tokenizer.json, vocabulary.json, or a pack folder (its vocabulary/). Omit it to train one on the training range.")
CacheOption = typer.Option(None, "--cache-dir", help="Cache folder (default: $TOKPACK_CACHE, else ~/.cache/tokpack).")


def prepare_command(
    corpus: Path = typer.Argument(..., help="A UTF-8 text file (its manifest, CORPUS.manifest.json beside it or --manifest, sets the splits), a folder of text files, JSON Lines (.jsonl) or parquet; a text file, JSON Lines or a folder's file compressed with gzip, zstd, bz2 or xz is read as its text."),
    vocab: Optional[Path] = VocabOption,
    cache_dir: Optional[Path] = CacheOption,
    vocab_size: Optional[int] = typer.Option(None, "--vocab-size", help="Ids of the vocabulary to train, <|endoftext|> included (GPT-2's 50,257 by default); fewer reachable is an error naming the count. Not with --vocab."),
    allow_smaller_vocab: bool = typer.Option(False, "--allow-smaller-vocab", help="Accept a trained vocabulary with fewer ids than --vocab-size when the corpus cannot reach it."),
    min_frequency: Optional[int] = typer.Option(None, "--min-frequency", help="A merge needs a pair seen at least this often (default 2). Not with --vocab."),
    vocab_sample_bytes: Optional[int] = typer.Option(None, "--vocab-sample-bytes", help="The most text the vocabulary is trained on: the whole training range up to this, else this much in pieces of up to 4 KiB spread evenly over it (default 500,000,000). Not with --vocab."),
    document_bytes: Optional[int] = typer.Option(None, "--document-bytes", help="Longest document in bytes; cut at the last newline at or before it (the newline ends the document; with no newline there, at the limit, never inside a character). Default: the size a text file's manifest was cut with, else 1048576."),
    trainer: TrainerName = typer.Option(TrainerName.exact, "--trainer", help="Vocabulary trainer: exact (tokpack's; faster and leaner than Hugging Face's here, see BENCHMARKS.md) or hf."),
    pattern: Optional[str] = typer.Option(None, "--pattern", help="Pre-tokenizer: gpt2, gpt4, polish, polish-phrase or a regex (default: gpt4, as in every trainer; with --vocab, the vocabulary's own: a bare rank file that is no published one needs it)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Encoding threads, or shard processes with --shards (default: every core; one thread for less than 16 MiB of text). The bytes do not depend on it."),
    text_field: str = typer.Option("text", "--text-field", help="The field (JSON Lines) or column (parquet) holding the text."),
    on_error: OnErrorName = typer.Option(OnErrorName.raise_, "--on-error", help="raise at the first unreadable file or record, or skip it and count it."),
    shards: Optional[int] = typer.Option(None, "--shards", help="Write a sharded dataset of this many shards into --out (needs --vocab)."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Where to write: the pack's folder (default: under the cache), or the sharded dataset's folder with --shards (a rerun resumes it; a URL such as s3://… is made locally, verified, uploaded, dataset.json last)."),
    validation: float = typer.Option(0.0, "--validation", help="Hold out this share as validation, written to the corpus's manifest (CORPUS.manifest.json beside it, or --manifest): a text file's last bytes, cut on document boundaries; a folder's files, JSON Lines' records or Parquet's rows, whole ones spread evenly over it."),
    test: float = typer.Option(0.0, "--test", help="Hold out this share as test, as --validation does (a text file's: after validation)."),
    manifest: Optional[Path] = typer.Option(None, "--manifest", help="The corpus's manifest (its splits), read and, with --validation/--test, written here instead of CORPUS.manifest.json beside it: for a folder you cannot write."),
    separator: Optional[str] = typer.Option(None, "--separator", help="Text that ends a document and appears in none, e.g. '<|endoftext|>' or $'\\n\\n' (a blank line); longer documents are still cut at --document-bytes."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (for scripts) instead of a table."),
    engine: EngineName = typer.Option(EngineName.local, "--engine", help="Who runs the shards: local processes, ray, or array (write the job for a scheduler's job array)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="An existing Ray cluster to join (with --engine ray)."),
    storage_options: Optional[str] = StorageOptions,
) -> None:
    """Tokenize a corpus once into a cached pack (or a sharded dataset) and print where it is.

    The ids are tiktoken's (encode_ordinary), from tokpack's compiled encoder for the named
    patterns (gpt2, gpt4, polish, polish-phrase) and those of the published vocabularies (GPT-2's,
    cl100k's, o200k's); a regex of your own is encoded by tiktoken itself (the same ids, several
    times slower), and every document's ids are checked to spell all of its bytes (a regex that
    skips characters is refused). The output says which encoder ran."""
    from tokpack.preparing import CorpusReading, Execution, VocabularyRequest, prepare
    from tokpack.preparing.preparation import check_held_out

    # The library's records check every setting (a training one beside --vocab, a share out of
    # range) before anything is read, for a sharded job too.
    request = VocabularyRequest(vocab=vocab, vocab_size=vocab_size, allow_smaller_vocab=allow_smaller_vocab,
                                min_frequency=min_frequency, vocab_sample_bytes=vocab_sample_bytes,
                                trainer=trainer.value, pattern=pattern)
    check_held_out(validation, test)
    execution = Execution(workers=workers)
    reading = CorpusReading(document_bytes=document_bytes, separator=separator, text_field=text_field,
                            on_error=on_error.value, manifest=manifest)
    from tokpack.corpus.sources import reading_cut

    # What was not asked for is read as the corpus's manifest was cut (another size is refused).
    document_bytes, separator = reading_cut(corpus, document_bytes=document_bytes, separator=separator,
                                            manifest=manifest)
    pattern = request.pattern
    if shards is not None:
        with _special_tokens_said():
            _prepare_sharded(corpus, out, shards=shards, engine=engine.value, ray_address=ray_address, workers=workers,
                             storage_options=storage_options_from(storage_options),
                             reading=replace(reading, document_bytes=document_bytes, separator=separator),
                             vocabulary=request, validation=validation, test=test, as_json=as_json)
        _note_added_tokens(vocab)
        return
    with prepare_progress() as progress, _special_tokens_said():
        prepared = prepare(corpus, cache_dir=cache_dir, validation=validation, test=test, out=out, reading=reading,
                           vocabulary=request, execution=replace(execution, report=progress))
    if as_json:
        typer.echo(json.dumps(summary_record(prepared), indent=2))
    else:
        _summary(prepared)
    from tokpack.corpus.sources.opening import FORMATS, format_of

    _warn_empty_ranges(prepared, document_bytes, manifest or corpus.with_name(corpus.name + ".manifest.json"),
                       by_bytes=corpus.is_file() and FORMATS[format_of(corpus)].split_by_bytes)
    _note_added_tokens(vocab)
    _note_fallback(prepared.tokenizer)


def _as_a_batch_process() -> Callable[[], None]:
    """Settings for the ``prepare`` command's process (the command line's; a program that calls
    tokpack's Python API keeps its own); returns what undoes them (:func:`_run_as_a_batch_process`
    calls it when the command returns, so a program that runs the command in its own process,
    ``tokpack.cli.main`` or a test runner, gets its process back):

    - The cyclic garbage collector runs after 50,000 new objects instead of 700: building the
      vocabulary's tables and files and numba's first call make hundreds of thousands of objects
      that live to the end, and the default threshold collected them over and over (several full
      passes over the heap a run). It still runs, so memory stays bounded.
    - numba, if the command loads it at all, does not load the ``numba_extensions`` entry points of
      every installed package at its first compiled call: tokpack's kernels take numpy arrays and
      numbers only and this command runs no other compiled code, while a package that registers
      one (awkward, which gigatoken pulls in) is costly to import. numba itself is not imported
      for this (its import is costly too, and ``prepare --vocab`` may not need it): its once-only
      flag is set when its entry-point module is first imported. Once
      undone, numba loads them at its next compiled call, as it would have: the program's own code
      may need them.
    - glibc keeps freed blocks for the allocations that follow (:func:`~tokpack._memory.reuse_freed_blocks`,
      fewer page faults); this one stays for the process.

    Their costs: BENCHMARKS.md, "prepare end to end" and "prepare's peak memory".
    """
    from tokpack._memory import reuse_freed_blocks

    threshold = gc.get_threshold()
    gc.set_threshold(max(50_000, threshold[0]), *threshold[1:])  # never lower than the process's own
    reuse_freed_blocks()
    flagged: list[Any] = []

    def flag(module: Any) -> None:  # as numba sets its once-only flag once it has loaded them
        if getattr(module, "_already_initialized", True) is False:
            module._already_initialized = True
            flagged.append(module)

    stop_waiting = when_imported(_NUMBA_ENTRY_POINTS, flag)

    def undo() -> None:
        gc.set_threshold(*threshold)
        stop_waiting()
        for module in flagged:
            module._already_initialized = False

    return undo


#: numba's module of entry points, whose ``_already_initialized`` says they were loaded.
_NUMBA_ENTRY_POINTS = "numba.core.entrypoints"


def _run_as_a_batch_process(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` run with :func:`_as_a_batch_process`'s settings, undone when it returns or fails."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        undo = _as_a_batch_process()
        try:
            command(*args, **kwargs)
        finally:
            undo()

    return run


def _warn_empty_ranges(prepared: TokenizedCorpus, document_bytes: int, manifest: Path, *, by_bytes: bool) -> None:
    """Say (on stderr) that the pack holds no document at all (an empty corpus), or that a
    held-out range holds none (a text file's share fell inside its last document; a folder's,
    JSON Lines' or Parquet's came to less than one whole file, record or row), so evaluation on it
    would find nothing; the manifest pins that cut, so the fix starts by deleting it."""
    if not prepared.meta.n_docs:
        stderr().print(f"warning: the corpus holds no text, so the pack {prepared.tokens_dir} holds no document",
                       soft_wrap=True, highlight=False, markup=False)
        return
    for name, span in prepared.meta.ranges.items():
        if name != "train" and span.documents[0] == span.documents[1]:
            again = (f"a smaller --document-bytes (now {document_bytes:,}) or a larger --{name}" if by_bytes else
                     f"a larger --{name} (whole files, records or rows are held out: a share of at least one)")
            stderr().print(f"warning: the {name!r} range of {manifest} holds no document; delete {manifest} and "
                           f"cut again with {again}", soft_wrap=True, highlight=False, markup=False)


@contextlib.contextmanager
def _special_tokens_said() -> Iterator[None]:
    """Say on stderr, in the command line's words, every special token the corpus's text spells
    without a separator (:class:`~tokpack.errors.SpecialTokenInText`), once the work inside is
    done, and the inputs ``--on-error skip`` left out (:class:`~tokpack.errors.InputsSkipped`);
    other warnings pass on as they came."""
    from tokpack._words import counted
    from tokpack.cli._flags import in_flags
    from tokpack.corpus.manifest import separator_setting
    from tokpack.errors import InputsSkipped, SpecialTokenInText

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SpecialTokenInText)
        warnings.simplefilter("always", InputsSkipped)
        try:
            yield
        finally:
            for warning in caught:
                if isinstance(warning.message, InputsSkipped):
                    left_out = warning.message
                    more = ", …" if left_out.count > len(left_out.problems) else ""
                    stderr().print(f"warning: --on-error skip left out {counted(left_out.count, 'file or record', 'files or records')}: "
                                   f"{'; '.join(left_out.problems)}{more}", soft_wrap=True, highlight=False, markup=False)
                    continue
                if not isinstance(warning.message, SpecialTokenInText):
                    warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
                    continue
                found = warning.message
                times = "once" if found.count == 1 else f"{found.count:,} times"
                stderr().print(f"warning: {found.first}: the text spells the special token {found.token!r} {times} (the "
                               "first here) and no --separator takes it out, so it is encoded as its characters and "
                               f"documents run across it; if it ends documents, prepare again with "
                               f"{in_flags(separator_setting(found.token), {'separator': ('--separator', None)})}", soft_wrap=True, highlight=False, markup=False)


def _note_added_tokens(vocab: Optional[Path]) -> None:
    """Say on stderr (stdout may be JSON) that a ``tokenizer.json``'s added tokens are encoded
    literally: Hugging Face reads them from text unless told not to, so its ids differ there."""
    if vocab is None or vocab.suffix != ".json" or not vocab.is_file():
        return
    try:
        added = json.loads(vocab.read_text(encoding="utf-8")).get("added_tokens") or []
        names = [entry["content"] for entry in added]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):  # read before; not a tokenizer.json
        return
    if names:
        typer.echo(f"note: {vocab.name} lists added tokens ({', '.join(names[:3])}{', …' if len(names) > 3 else ''}); "
                   "tokpack encodes text that spells them literally, as Hugging Face does with "
                   "encode_special_tokens = True", err=True)


def _note_fallback(tokenizer: BpeTokenizer) -> None:
    """Say on stderr (stdout may be JSON) that tiktoken encodes this vocabulary, and why."""
    from tokpack.vocab.compiled import COMPILED_PATTERNS, MISSING

    reason = tokenizer.fallback_reason
    if reason is None:
        return
    if reason == MISSING:  # the pattern is fine: the installation lacks the encoder
        remedy = ("reinstall tokpack with a C compiler (gcc or clang) to build it; if one is there, "
                  "'pip install -v tokpack' shows why the build failed")
    elif tokenizer.pattern not in COMPILED_PATTERNS:
        remedy = ("tokpack's compiled encoder has the patterns --pattern names (gpt2, gpt4, polish, polish-phrase) "
                  "and the published vocabularies' own")
    else:  # ids past the compiled encoder's limit: nothing to change
        remedy = "the ids are the same"
    typer.echo(f"note: tiktoken encodes this vocabulary ({reason}), several times slower; {remedy}", err=True)


def _prepare_sharded(corpus: Path, out_text: Optional[str], *, shards: int, engine: str, ray_address: Optional[str],
                     workers: Optional[int], storage_options: dict[str, Any], reading: CorpusReading,
                     vocabulary: VocabularyRequest, validation: float = 0.0, test: float = 0.0,
                     as_json: bool = False) -> None:
    """``prepare --shards``: the library's sharded job with the command's records (it checks them)."""
    from tokpack._words import counted
    from tokpack.engines import prepare_sharded
    from tokpack.store.remote import is_url, upload_dataset
    from tokpack.vocab.loading import load_vocabulary

    if vocabulary.vocab is None:
        raise InputError("--shards needs --vocab: every shard must share one vocabulary",
                         fix="train one first (tokpack bpe train, or prepare without --shards) and pass it as --vocab PATH")
    if out_text is None:
        raise InputError("--shards needs --out: the folder the sharded dataset is written to")
    url = out_text if is_url(out_text) else None
    if url is not None and engine != "local":
        raise InputError("--out URL needs --engine local", fix="for Ray or job arrays, write to shared storage, then upload")
    out = Path(tempfile.mkdtemp(prefix="tokpack-shards-")) / "dataset" if url is not None else Path(out_text)
    if engine == "array":  # write the job; the scheduler runs the shards
        from tokpack.engines import start_job

        start_job(corpus, out, shards=shards, validation=validation, test=test, reading=reading, vocabulary=vocabulary)
        if as_json:
            typer.echo(json.dumps({"job": str(out), "shards": shards,
                                   "command": f"tokpack shard run {out}"}, indent=2))
            return
        stdout().print(f"job written to {out}; run its {shards} shard{'s' if shards != 1 else ''} as a job array, e.g. with Slurm:\n"
                      f"  sbatch --array=0-{shards - 1} --wrap 'tokpack shard run {out}'\n"
                      "the last shard to finish writes dataset.json")
        return
    total = corpus.stat().st_size if corpus.is_file() else sum(p.stat().st_size for p in corpus.rglob("*") if p.is_file())
    with shard_progress(total, shards) as (on_done, on_progress):
        dataset = prepare_sharded(corpus, out, shards=shards, engine=engine, processes=workers, ray_address=ray_address,
                                  validation=validation, test=test, reading=reading, vocabulary=vocabulary,
                                  on_done=on_done, on_progress=on_progress)
    if url is not None:
        upload_dataset(out, url, storage_options=storage_options)
        shutil.rmtree(out.parent, ignore_errors=True)
    tokenizer = load_vocabulary(vocabulary.vocab, pattern=vocabulary.pattern)  # which encoder ran, said below
    meta = dataset.meta
    if as_json:
        typer.echo(json.dumps({"dataset": url or str(dataset.path), "shards": len(dataset.shards),
                               "n_docs": meta.n_docs, "n_tokens": meta.n_tokens,
                               "vocabulary": meta.vocabulary.model_dump(mode="json", by_alias=True),
                               "ranges": {name: span.model_dump(mode="json") for name, span in meta.ranges.items()},
                               "counts": meta.counts,
                               "encoder": {"engine": tokenizer.engine, "reason": tokenizer.fallback_reason}}, indent=2))
        _note_fallback(tokenizer)
        return
    stdout().print(f"[green]sharded dataset[/] {url or dataset.path}: {counted(len(dataset.shards), 'shard')}, {counted(meta.n_docs, 'document')}, "
                  f"{counted(meta.n_tokens, 'id')}, vocabulary {meta.vocabulary.sha256}"
                  + (f", {counted(meta.counts['skipped'], 'input')} skipped" if meta.counts.get("skipped") else ""))
    _note_fallback(tokenizer)


def shard_run_command(
    dataset: Path = typer.Argument(..., help="A sharded job's folder (made by 'tokpack prepare --shards N --out DIR --engine array' or 'tokpack chess tokenize --pack --engine array')."),
    rank: Optional[int] = typer.Option(None, "--rank", help="The shard to make (default: from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, or TOKPACK_RANK and TOKPACK_WORLD_SIZE)."),
) -> None:
    """Make one shard of a sharded job: the task of a job array, one rank per array job."""
    from tokpack.engines import run_array_task, shards_done
    from tokpack.store.format import DATASET_FILE

    rank, world_size, wrote = run_array_task(dataset, rank)
    # each task's log says whether the job is finished: only the last task to finish writes the dataset
    if (dataset / DATASET_FILE).is_file():
        state = f"the dataset is complete: {dataset / DATASET_FILE}"
    else:
        state = f"{shards_done(dataset, world_size):,} of {world_size:,} shards done (the last to finish writes {DATASET_FILE})"
    stdout().print(f"shard {rank} of {world_size}: " + ("written" if wrote else "already complete") + f"; {state}",
                   soft_wrap=True, highlight=False, markup=False)


def merge_command(
    dataset: Path = typer.Argument(..., help="A sharded dataset folder (with dataset.json)."),
    out: Path = typer.Argument(..., help="The pack to write (must not exist)."),
) -> None:
    """Concatenate a sharded dataset into one pack, streaming; its checksums equal the dataset's."""
    from tokpack._words import counted
    from tokpack.store import ShardedDataset, merge_dataset

    meta = merge_dataset(ShardedDataset(dataset, verify=True), out)
    stdout().print(f"[green]merged[/] into {out}: {counted(meta.n_docs, 'document')}, {counted(meta.n_tokens, 'id')}")


def inspect_command(
    pack: str = typer.Argument(..., help="A pack or sharded dataset: a folder, or an fsspec URL (s3://…, gs://…); a URL's shards are downloaded into the cache to be verified."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Hash the arrays and check every id is in the vocabulary (the default); --no-verify checks counts, sizes and seals only."),
    datatrove_tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", "--datatrove-tokenizer", help="Read PACK as another framework's files (datatrove .ds folder, Megatron .bin/.idx, nanoGPT .bin) made with this tokenizer (tokenizer.json or rank file)."),
    as_json: bool = typer.Option(False, "--json", help="Print only the record as JSON (for scripts), with 'verified' and 'vocabulary_dir' added."),
    decode: Optional[int] = typer.Option(None, "--decode", metavar="DOC", help="Also print the text of document DOC, decoded with the vocabulary the pack carries."),
    storage_options: Optional[str] = StorageOptions,
    cache_dir: Optional[Path] = CacheOption,
) -> None:
    """Print a pack's meta.json (or a dataset's dataset.json) after checking the data against it."""
    from tokpack._words import counted
    from tokpack.store import open_tokens
    from tokpack.store.remote import is_url, open_local_or_remote

    opened: TokenSource
    if datatrove_tokenizer is not None:
        from tokpack.store.importing import open_foreign

        opened = open_foreign(Path(pack), tokenizer=datatrove_tokenizer, verify=verify)
    elif is_url(pack):
        opened = open_local_or_remote(pack, storage_options=storage_options_from(storage_options), verify=verify, cache_dir=cache_dir)
    else:
        opened = open_tokens(Path(pack), verify=verify)
    vocabulary_dir = _carried_vocabulary_dir(Path(opened.path))  # None for a URL: its files are not here
    if as_json:
        typer.echo(json.dumps({**json.loads(opened.meta.to_json()), "verified": verify,
                               "vocabulary_dir": None if vocabulary_dir is None else str(vocabulary_dir)},
                              indent=2, sort_keys=True))
    else:
        stdout().print_json(opened.meta.to_json())
        # Say exactly what was checked: another framework's files carry no checksums of their own.
        checked = getattr(opened, "verified_what", "checksums verified")
        stdout().print(f"[green]ok[/]: {counted(opened.n_docs, 'document')}, {counted(opened.n_tokens, 'id')} "
                      + (f"({checked})" if verify else "(counts, sizes and seals checked; checksums not verified)"))
        stdout().print("vocabulary: " + (f"{vocabulary_dir} (tokenizer.json, ranks.tiktoken, vocabulary.json)"
                                        if vocabulary_dir is not None else "not carried by this pack"),
                      soft_wrap=True, highlight=False, markup=False)
    if decode is not None:
        import numpy as np

        from tokpack.vocab.loading import load_vocabulary

        if not 0 <= decode < opened.n_docs:
            raise InputError(f"--decode {decode}: the pack has documents 0 to {opened.n_docs - 1}")
        if opened.meta.vocabulary.scheme != "bytelevel-bpe":  # chess schemes, bare ids
            raise InputError(f"--decode {decode}: the pack holds {opened.meta.vocabulary.scheme!r} ids, which no text "
                             "vocabulary spells", where=pack, fix="--decode reads text packs; for a chess pack, 'tokpack "
                             "serve which' names the month table and game of each row")
        if vocabulary_dir is None:
            raise InputError("carries no vocabulary to decode with here (written before packs carried theirs, "
                             "another framework's files, or a URL)", where=pack, fix="decode a local pack that carries one")
        tokenizer = load_vocabulary(Path(opened.path))
        end = int(opened.starts[decode + 1]) if decode + 1 < opened.n_docs else opened.n_tokens
        ids = opened.take(np.arange(int(opened.starts[decode]), end))
        sys.stdout.write(tokenizer.decode(ids.tolist()))
        sys.stdout.flush()


def _carried_vocabulary_dir(path: Path) -> Optional[Path]:
    """Where the vocabulary files of a pack (or a dataset's first shard) are, if it has them, or
    those of a tokpack export (checked against its sidecar)."""
    from tokpack._schema import read_record
    from tokpack.store.format import DATASET_FILE, META_FILE, PackMeta

    if (path / META_FILE).is_file():
        return _pack_vocabulary_dir(path, read_record(PackMeta, path / META_FILE))
    if (path / DATASET_FILE).is_file():
        from tokpack.store.dataset import DatasetRecord

        shards = read_record(DatasetRecord, path / DATASET_FILE).shards
        return _carried_vocabulary_dir(path / shards[0].name) if shards else None
    from tokpack.store.vocabulary import export_vocabulary_dir  # (its sidecar records: for an export only)

    return export_vocabulary_dir(path)


def _pack_vocabulary_dir(path: Path, meta: PackMeta) -> Optional[Path]:
    """Where the pack at ``path`` (its ``meta``) keeps its vocabulary files, if it has them."""
    from tokpack.store.format import VOCABULARY_DIR

    return path / VOCABULARY_DIR if meta.vocabulary_files else None


def demo_command(
    cache_dir: Optional[Path] = CacheOption,
) -> None:
    """Prepare the bundled Polish sample: train a vocabulary, tokenize, pack, show a batch."""
    from tokpack.corpus import sample_corpus
    from tokpack.preparing import prepare

    corpus = sample_corpus()
    stdout().print(f"[bold]tokpack demo[/]: the bundled sample {corpus.name} ({corpus.stat().st_size:,} bytes; "
                  f"sources and licence in {corpus.parent / 'SOURCES.md'})")
    with prepare_progress() as progress:
        prepared = prepare(corpus, cache_dir=cache_dir, vocab_size=2048, document_bytes=8192, progress=progress)
    _summary(prepared)
    inputs = prepared.batches(length=32, global_batch=2).batch(0)["input_ids"]
    tokenizer = prepared.tokenizer
    stdout().print("\n[bold]First batch[/] (step 0, 2 rows of 32 inputs; tokens separated by '|'):")
    for row in inputs:
        pieces = [tokenizer.decode([int(i)]) for i in row]
        stdout().print("  " + "|".join(pieces).replace("\n", "⏎"), highlight=False, markup=False)


def _summary(prepared: TokenizedCorpus) -> None:
    from tokpack._words import counted

    meta = prepared.meta
    characters = meta.counts.get("characters")
    rows = [("documents", f"{meta.n_docs:,}"), ("tokens", f"{meta.n_tokens:,} ({meta.dtype})")]
    # meta.json keeps its ranges sorted by name; the table lists them as the pack holds them
    for name, span in sorted(meta.ranges.items(), key=lambda item: (item[1].tokens[0], item[1].documents[0])):
        rows.append((f"  {name}", f"documents {span.documents[0]:,}-{span.documents[1]:,}, tokens {span.tokens[0]:,}-{span.tokens[1]:,}"))
    rows.append(("vocabulary", f"{meta.vocabulary.scheme} sha256 {meta.vocabulary.sha256}"))
    rows.append(("n_vocab", f"{meta.vocabulary.n_vocab:,}"))
    tokenizer = prepared.tokenizer
    rows.append(("encoder", "compiled (tiktoken's ids)" if tokenizer.fallback_reason is None
                 else f"tiktoken: {tokenizer.fallback_reason}"))
    if prepared.vocabulary_sample:
        rows.append(("vocabulary sample", prepared.vocabulary_sample))
        if (cost := sample_cost(prepared.vocabulary_sample_bytes)) is not None:
            rows.append(("the rest", cost))
    if characters is not None and meta.n_tokens:
        rows.append(("compression", f"{characters / meta.n_tokens:.2f} characters per token"))
    if meta.counts.get("skipped"):
        rows.append(("skipped", f"{counted(meta.counts['skipped'], 'unreadable file or record', 'unreadable files or records')} (--on-error skip)"))
    print_summary("Prepared corpus", rows)
    # Paths on their own lines, never in a table cell that would cut them with "…".
    print_line(f"pack: {prepared.tokens_dir}")
    print_line(f"vocabulary file: {prepared.vocabulary_path}")
    carried = _pack_vocabulary_dir(prepared.tokens_dir, meta)  # the meta prepare read: not read again
    if carried is not None:
        print_line(f"vocabulary in the pack: {carried}")


#: CPU seconds the exact trainer takes per GB of mixed text, its reading included (BENCHMARKS.md,
#: "The vocabulary sample"); what a bigger sample would cost is said with it.
TRAINING_CPU_SECONDS_PER_GB = 51


def sample_cost(sampled: tuple[int, int] | None) -> str | None:
    """What training on the whole range would cost, for a vocabulary trained on less than half of
    it; ``None`` otherwise.

    >>> sample_cost((500_000_000, 5_000_000_000))
    'not trained on 4,500.0 MB of the training range: --vocab-sample-bytes 5000000000 trains on all of it, about 230 CPU s more (BENCHMARKS.md: the vocabulary sample)'
    >>> sample_cost((500, 600)) is None
    True
    """
    if sampled is None or sampled[0] * 2 >= sampled[1]:
        return None
    used, whole = sampled
    more = (whole - used) / 1e9 * TRAINING_CPU_SECONDS_PER_GB
    return (f"not trained on {(whole - used) / 1e6:,.1f} MB of the training range: --vocab-sample-bytes {whole} trains on "
            f"all of it, about {more:,.0f} CPU s more (BENCHMARKS.md: the vocabulary sample)")


def summary_record(prepared: TokenizedCorpus) -> dict[str, Any]:
    """What ``prepare --json`` prints: where the pack and vocabulary are, the pack's counts, and the
    encoder (compiled, with what its piece caches hold, or tiktoken's fallback)."""
    meta = prepared.meta
    characters = meta.counts.get("characters")
    return {
        "pack": str(prepared.tokens_dir), "vocabulary_file": str(prepared.vocabulary_path),
        "vocabulary_dir": None if (carried := _pack_vocabulary_dir(prepared.tokens_dir, meta)) is None else str(carried),
        "vocabulary": meta.vocabulary.model_dump(mode="json", by_alias=True),
        "n_docs": meta.n_docs, "n_tokens": meta.n_tokens, "dtype": meta.dtype,
        "ranges": {name: span.model_dump(mode="json") for name, span in meta.ranges.items()},
        "counts": dict(meta.counts),
        "characters_per_token": characters / meta.n_tokens if characters is not None and meta.n_tokens else None,
        "vocabulary_sample": prepared.vocabulary_sample,
        "vocabulary_sample_cost": sample_cost(prepared.vocabulary_sample_bytes),
        "encoder": prepared.tokenizer.encoder_report(),
    }


def register(app: typer.Typer) -> None:
    """Add these commands to the top-level app."""
    app.command("prepare")(_run_as_a_batch_process(prepare_command))
    app.command("inspect")(inspect_command)
    app.command("demo")(demo_command)
    app.command("merge")(merge_command)
    shard = command_group("Sharded jobs: run one shard (for job arrays).")
    shard.command("run")(shard_run_command)
    app.add_typer(shard, name="shard")


__all__ = ["register"]
