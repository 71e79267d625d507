"""``tokpack export`` and ``tokpack import``: other frameworks' token files, out and in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from tokpack.cli._console import StorageOptions, stderr, stdout, storage_options_from

FORMAT_HELP = ("megatron (OUT.bin/OUT.idx), nanogpt (OUT/train.bin, val.bin), litdata (OUT/RANGE/ chunks), "
               "mds (OUT/RANGE/ MosaicML shards), hf (OUT/RANGE/*.parquet)")


@contextmanager
def _token_progress(total: int, label: str) -> Iterator[Callable[[int], None]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = [TextColumn(f"{label:>9}"), BarColumn(), MofNCompleteColumn(), TextColumn("ids"), TimeRemainingColumn()]
    with Progress(*columns, console=stderr(), disable=not stderr().is_terminal) as progress:
        task = progress.add_task(label, total=max(total, 1))
        yield lambda done: progress.advance(task, done)


def export_command(
    source: str = typer.Argument(..., help="A pack or sharded dataset (a folder, or an fsspec URL)."),
    out: str = typer.Argument(..., help="What to write: a Megatron prefix, or a folder; a URL (s3://…) uploads it."),
    fmt: str = typer.Option(..., "--format", "-f", help=FORMAT_HELP),
    append_eod: bool = typer.Option(False, "--append-eod", help="Put the end-of-document id after every document, as Megatron's "
                                    "preprocess_data.py --append-eod does: without it, GPT training packs documents "
                                    "back to back and the model never sees where one ends (nanoGPT always has it)."),
    eod_id: Optional[int] = typer.Option(None, "--eod-id", help="The end-of-document id (default: the pack's padding id, <|endoftext|> for text)."),
    range_name: Optional[str] = typer.Option(None, "--range", help="Export this range only (train, validation, test, or another named range such as a chess month)."),
    rows_per_file: int = typer.Option(1 << 20, "--rows-per-file", help="Documents per file (hf, mds, litdata)."),
    storage_options: Optional[str] = StorageOptions,
) -> None:
    """Write a pack or sharded dataset in a format a training framework loads, with a sidecar naming its vocabulary."""
    from tokpack._words import counted
    from tokpack.store.exporting import ExportOptions, check_options, export
    from tokpack.store.remote import open_local_or_remote

    check_options(ExportOptions(rows_per_file=rows_per_file))
    options = storage_options_from(storage_options)
    opened = open_local_or_remote(source, storage_options=options, verify=None)
    with _token_progress(opened.n_tokens, "export") as progress:
        record = export(opened, fmt, out, append_eod=append_eod, eod_id=eod_id, range_name=range_name,
                        rows_per_file=rows_per_file, progress=progress, storage_options=options)
    parts = ", ".join(f"{name} ({counted(p.documents[1] - p.documents[0], 'document')})" for name, p in record.parts.items())
    stdout().print(f"[green]exported[/] {fmt} to {out}: {parts}; ids {record.dtype}"
                  + (f", end-of-document id {record.eod_id}" if record.eod_id is not None else ""))


def import_command(
    source: Path = typer.Argument(..., help="A Megatron prefix (or its .bin/.idx), a nanoGPT .bin or folder, a datatrove folder, or a folder tokpack exported as litdata, mds or hf."),
    out: Path = typer.Argument(..., help="The pack to write (must not exist)."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="The vocabulary that made the ids (tokenizer.json, rank file, vocabulary.json); not needed for tokpack's own exports."),
    kind: Optional[str] = typer.Option(None, "--kind", help="megatron, nanogpt, datatrove, litdata, mds or hf (default: from the files)."),
    eod_id: Optional[int] = typer.Option(None, "--eod-id", help="The id that ends each document: nanoGPT's separator (default: the tokenizer's <|endoftext|>); for Megatron or datatrove files, naming it removes it."),
    keep_eod: bool = typer.Option(False, "--keep-eod", help="Keep the separator ids in the documents instead of removing them."),
) -> None:
    """Convert another framework's token files into a verified pack."""
    from tokpack._words import counted
    from tokpack.store.importing import detect, import_pack, open_foreign

    kind = kind or detect(source)
    opened = open_foreign(source, kind=kind, tokenizer=tokenizer, eod_id=eod_id)
    with _token_progress(opened.n_tokens, "import") as progress:
        meta = import_pack(source, out, kind=kind, tokenizer=tokenizer, eod_id=eod_id,
                           strip_eod=False if keep_eod else None, progress=progress, opened=opened)
    stdout().print(f"[green]imported[/] into {out}: {counted(meta.n_docs, 'document')}, {counted(meta.n_tokens, 'id')}, "
                  f"vocabulary {meta.vocabulary.short} (verified)")


def register(app: typer.Typer) -> None:
    """Add ``export`` and ``import`` to the top-level app."""
    app.command("export")(export_command)
    app.command("import")(import_command)


__all__ = ["register"]
