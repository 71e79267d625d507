"""``tokpack prepare``, ``inspect`` and ``demo``: the text corpus commands."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from tokpack.cli._console import console, one_line_errors, prepare_progress
from tokpack.corpus import TokenizedCorpus, prepare, sample_corpus
from tokpack.store import Pack

VocabOption = typer.Option(None, "--vocab", help="Your vocabulary: a rank file, tokenizer.json or vocabulary.json. Omit it to train one on the training range.")
CacheOption = typer.Option(None, "--cache-dir", help="Cache folder (default: $TOKPACK_CACHE, else ~/.cache/tokpack).")


@one_line_errors
def prepare_command(
    corpus: Path = typer.Argument(..., help="The UTF-8 corpus file (a manifest.json beside it sets the splits)."),
    vocab: Optional[Path] = VocabOption,
    cache_dir: Optional[Path] = CacheOption,
    vocab_size: int = typer.Option(50256, "--vocab-size", help="Ranks to train, the 256 bytes included."),
    min_frequency: int = typer.Option(2, "--min-frequency", help="A merge needs a pair seen at least this often."),
    vocab_sample_bytes: int = typer.Option(10_000_000, "--vocab-sample-bytes", help="Bytes of the training range the trainer sees."),
    document_bytes: int = typer.Option(1_048_576, "--document-bytes", help="Longest document; cut at the last newline before it."),
    trainer: str = typer.Option("hf", "--trainer", help="Vocabulary trainer: 'hf' (Hugging Face) or 'exact' (tokpack's)."),
) -> None:
    """Tokenize a corpus once into a cached pack and print where it is."""
    if trainer not in ("hf", "exact"):
        raise ValueError(f"--trainer must be 'hf' or 'exact', got {trainer!r}")
    with prepare_progress() as progress:
        prepared = prepare(corpus, vocab=vocab, cache_dir=cache_dir, vocab_size=vocab_size, min_frequency=min_frequency,
                           vocab_sample_bytes=vocab_sample_bytes, document_bytes=document_bytes,
                           trainer=trainer, progress=progress)  # type: ignore[arg-type]
    _summary(prepared, corpus)


@one_line_errors
def inspect_command(
    pack: Path = typer.Argument(..., help="A pack directory."),
    verify: bool = typer.Option(False, "--verify", help="Also hash both arrays and check every id is in the vocabulary."),
) -> None:
    """Print a pack's meta.json after checking the pack against it."""
    opened = Pack(pack, verify=verify)
    console.print_json(opened.meta.to_json())
    console.print(f"[green]ok[/]: {opened.n_docs:,} documents, {opened.n_tokens:,} ids "
                  + ("(checksums verified)" if verify else "(counts and sizes checked; --verify hashes the data)"))


@one_line_errors
def demo_command(
    cache_dir: Optional[Path] = CacheOption,
) -> None:
    """Prepare the bundled Polish sample: train a vocabulary, tokenize, pack, show a batch."""
    corpus = sample_corpus()
    console.print(f"[bold]tokpack demo[/]: the bundled sample {corpus.name} ({corpus.stat().st_size:,} bytes; "
                  f"sources and licence in {corpus.parent / 'SOURCES.md'})")
    with prepare_progress() as progress:
        prepared = prepare(corpus, cache_dir=cache_dir, vocab_size=2048, document_bytes=8192, progress=progress)
    _summary(prepared, corpus)
    batches = prepared.batches(batch=2, length=32)
    ids = batches.ids(0)
    tokenizer = prepared.tokenizer()
    console.print("\n[bold]First batch[/] (step 0, 2 rows of 32 inputs; tokens separated by '|'):")
    for row in ids:
        pieces = [tokenizer.decode([int(i)]) for i in row[:-1]]
        console.print("  " + "|".join(pieces).replace("\n", "⏎"), highlight=False, markup=False)


def _summary(prepared: TokenizedCorpus, corpus: Path) -> None:
    meta = prepared.manifest
    characters = len(corpus.read_text(encoding="utf-8")) if corpus.stat().st_size < 1 << 30 else None
    table = Table(title="Prepared corpus", show_header=False)
    table.add_row("documents", f"{meta.n_docs:,}")
    table.add_row("tokens", f"{meta.n_tokens:,} ({meta.dtype})")
    for name, span in meta.ranges.items():
        table.add_row(f"  {name}", f"documents {span.documents[0]:,}-{span.documents[1]:,}, tokens {span.tokens[0]:,}-{span.tokens[1]:,}")
    table.add_row("vocabulary", f"{meta.vocabulary.scheme} sha256 {meta.vocabulary.sha256}")
    table.add_row("n_vocab", f"{meta.vocabulary.n_vocab:,}")
    if characters is not None and meta.n_tokens:
        table.add_row("compression", f"{characters / meta.n_tokens:.2f} characters per token")
    table.add_row("pack", str(prepared.tokens_dir))
    table.add_row("vocabulary file", str(prepared.vocabulary_path))
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add these commands to the top-level app."""
    app.command("prepare")(prepare_command)
    app.command("inspect")(inspect_command)
    app.command("demo")(demo_command)


__all__ = ["register"]
