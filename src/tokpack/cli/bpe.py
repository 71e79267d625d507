"""Exact BPE: make and check proofs for challenges, and explain merges step by step."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from tokpack.cli._console import OnErrorName, command_group
from tokpack.errors import InputError

if TYPE_CHECKING:  # rich and the BPE modules are imported by the commands that use them, not by every command
    from rich.console import Console
    from rich.progress import ProgressColumn
    from rich.text import Text

    from tokpack.bpe.challenge import Excerpt, Limits, Verification
    from tokpack.bpe.fast import BpeProgress
    from tokpack.bpe.records import Challenge, Proof, TraceRow

bpe_app = command_group("Exact BPE: make and check proofs for challenges, and explain merges step by step.")


@cache
def _out() -> Console:
    from rich.console import Console

    return Console(highlight=False)


@cache
def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _rate() -> ProgressColumn:
    """A progress column of merges a second (rich's speed column speaks of bytes)."""
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} merges/s" if speed else "- merges/s", style="cyan")

    return Rate()


@bpe_app.command()
def train(
    corpus: Annotated[Path, typer.Argument(help="A text file, a folder of them, JSON Lines or Parquet (as prepare reads).")],
    output: Annotated[Path, typer.Option("-o", "--out", "--output", help="Folder for ranks.tiktoken and vocabulary.json: written whole when new, empty or holding only a vocabulary (replaced); beside the files of a folder that has others.")],
    vocab_size: Annotated[int, typer.Option(min=258, help="Ids in the result: 256 bytes, the merges and <|endoftext|>.")] = 8192,
    pattern: Annotated[str, typer.Option(help="Pre-tokenizer: gpt2, gpt4, polish, polish-phrase, or a regex (gpt4 by default, as in every trainer).")] = "gpt4",
    min_frequency: Annotated[int, typer.Option(min=1, help="Stop when the best pair occurs fewer times.")] = 2,
    text_field: Annotated[str, typer.Option(help="The field (JSON Lines) or column (Parquet) holding the text.")] = "text",
    workers: Annotated[int, typer.Option(min=0, help="Threads (gpt2, gpt4, polish, polish-phrase, and the cl100k and o200k patterns: the compiled splitter) or processes (any other regex) that split and count (0: one per core).")] = 0,
    allow_smaller_vocab: Annotated[bool, typer.Option("--allow-smaller-vocab", help="Accept fewer ids than --vocab-size when the corpus cannot reach it.")] = False,
    separator: Annotated[Optional[str], typer.Option(help="Text that ends a document, as prepare --separator: no merge spans it or learns it (default: the one a text file's manifest was cut with, else none).")] = None,
    document_bytes: Annotated[Optional[int], typer.Option(help="Longest document, as prepare --document-bytes (default: the size a text file's manifest was cut with, else 1048576).")] = None,
    manifest: Annotated[Optional[Path], typer.Option(help="A text file's manifest, as prepare --manifest (default: CORPUS.manifest.json beside it).")] = None,
    on_error: Annotated[OnErrorName, typer.Option("--on-error", help="raise at the first unreadable file or record, or skip it and count it (as prepare --on-error).")] = OnErrorName.raise_,
) -> None:
    """Train an exact byte-level BPE vocabulary from files, streamed: memory grows with the
    distinct pre-tokens, not the corpus. Same merges as training on the documents in memory."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    from tokpack._words import counted
    from tokpack.bpe.fast import train_from_files
    from tokpack.vocab.bytelevel import save_folder
    from tokpack.vocab.patterns import resolve_pattern
    from tokpack.vocab.trainers import TRAINED_SPECIAL_TOKENS

    try:
        regex = resolve_pattern(pattern)
    except ValueError as error:
        raise _fail(f"--pattern: {error}") from None
    try:
        save_folder(output)  # a folder the save would refuse is refused before the training
    except InputError as error:
        raise _fail(f"--out: {error}") from None
    counting = Progress(TextColumn("{task.description:>8}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                        TimeElapsedColumn(), console=_err(), disable=not _err().is_terminal)
    merging = Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(), _rate(),
                       TimeElapsedColumn(), console=_err(), disable=not _err().is_terminal)
    tasks: dict[str, object] = {}

    def report(event: BpeProgress) -> None:
        bar = counting if event.stage == "count" else merging
        if event.stage not in tasks:
            bar.start()
            tasks[event.stage] = bar.add_task("counting" if event.stage == "count" else "merging", total=event.total)
        bar.update(tasks[event.stage], completed=event.done, total=event.total)  # type: ignore[arg-type]
        if event.stage == "merge" and counting.live.is_started:
            counting.stop()

    try:
        result = train_from_files(corpus, vocab_size - 257, pattern=regex, min_frequency=min_frequency,
                                  text_field=text_field, workers=workers or None, progress=report, separator=separator,
                                  document_bytes=document_bytes, manifest=manifest, on_error=on_error.value,
                                  cut_out=TRAINED_SPECIAL_TOKENS)
        tokenizer = result.training.as_tokenizer()
        if tokenizer.n_vocab < vocab_size and not allow_smaller_vocab:
            raise InputError(f"the corpus reaches only {tokenizer.n_vocab:,} ids of the {vocab_size:,} asked for "
                             f"(too few pairs occur --min-frequency {min_frequency} times)", where=corpus,
                             # (--vocab-size takes 258 at least: one merge)
                             fix=(f"pass --vocab-size {tokenizer.n_vocab} or less, add text, or accept fewer with "
                                  "--allow-smaller-vocab" if tokenizer.n_vocab >= 258 else
                                  "add text, lower --min-frequency, or accept fewer with --allow-smaller-vocab"))
        tokenizer.save(output)
    except (ValueError, OSError) as error:
        raise _fail(str(error).splitlines()[0]) from None
    finally:
        for bar in (counting, merging):
            if bar.live.is_started:
                bar.stop()
    seconds = result.training.seconds
    where = f"the training range of {corpus} (its manifest holds out the rest)" if result.held_out else corpus
    _out().print(f"{tokenizer.n_vocab:,} ids from {result.n_bytes:,} bytes of {where} "
               f"(count {seconds['split_count']:.1f} s, merge {seconds['merge']:.1f} s)"
               + (f", {counted(result.skipped, 'file or record', 'files or records')} skipped" if result.skipped else ""))
    _out().print(f"wrote {output}")


def _fail(message: str, code: int = 2) -> typer.Exit:
    from rich.markup import escape

    from tokpack.cli._console import in_command_flags

    _err().print(f"[red]error:[/red] {escape(in_command_flags(message))}", soft_wrap=True)
    return typer.Exit(code)


def _read(model: type[Challenge | Proof], path: Path) -> Challenge | Proof:
    from tokpack.bpe.challenge import read_json_record

    try:
        return read_json_record(model, path)
    except ValueError as error:
        raise _fail(str(error)) from None


# None: the challenge format's own limits (tokpack.bpe.challenge.Limits), read when a command runs.
MaxCorpusBytes = Annotated[int | None, typer.Option(
    "--max-corpus-bytes", min=0, show_default=False,
    help="Refuse a challenge whose corpus is larger (UTF-8 bytes; default 16,777,216).")]
MaxMerges = Annotated[int | None, typer.Option(
    "--max-merges", min=0, show_default=False, help="Refuse a challenge asking for more merges (default 50,000).")]


def _limits(max_corpus_bytes: int | None, max_merges: int | None) -> Limits:
    """The challenge limits, the format's defaults where an option was not given."""
    from tokpack.bpe.challenge import Limits

    defaults = Limits()
    return Limits(defaults.max_corpus_bytes if max_corpus_bytes is None else max_corpus_bytes,
                  defaults.max_merges if max_merges is None else max_merges)


@bpe_app.command()
def proof(
    challenge: Annotated[Path, typer.Argument(help="challenge.json: corpus, num_merges, corpus_sha256.")],
    output: Annotated[Path, typer.Option("--out", "-o", "--output", help="Where to write the proof.")] = Path("proof.json"),
    max_corpus_bytes: MaxCorpusBytes = None,
    max_merges: MaxMerges = None,
) -> None:
    """Train the fast trainer on a challenge's corpus and write proof.json (one trace row per merge).

    A corpus that does not match its checksum, a challenge past its expiry, or one over the
    limits, is refused (exit 2).
    """
    from tokpack.bpe.challenge import ChallengeRefused, make_proof, write_proof
    from tokpack.bpe.records import Challenge

    record = _read(Challenge, challenge)
    assert isinstance(record, Challenge)
    try:
        result = make_proof(record, limits=_limits(max_corpus_bytes, max_merges))
    except ChallengeRefused as error:  # reported in this command's flags, as every library error is
        raise ChallengeRefused(error.what, where=challenge, fix=error.fix) from None
    except ValueError as error:
        raise _fail(f"{challenge}: {error}") from None
    try:
        write_proof(result, output)
    except OSError as error:
        raise _fail(f"{output}: cannot write ({error.strerror or error})") from None
    _out().print(f"wrote {output}: {len(result.merges)} merges for challenge {result.challenge_id}")


@bpe_app.command()
def verify(
    proof_path: Annotated[Path, typer.Argument(metavar="PROOF", help="proof.json to check.")],
    challenge: Annotated[Path, typer.Argument(help="The challenge.json the proof answers.")],
    ignore_expiry: Annotated[bool, typer.Option(help="Check an old proof against an expired challenge.")] = False,
    max_corpus_bytes: MaxCorpusBytes = None,
    max_merges: MaxMerges = None,
) -> None:
    """Recompute the challenge with the fast trainer and compare the proof row by row.

    Exit 0: valid. Exit 1: the proof diverges; the first divergent step is replayed with the
    reference core and shown with both rows and the token sequences around each pair. Exit 2: an
    unreadable, altered, expired or over-limit input.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tokpack.bpe.challenge import ChallengeRefused, verify_proof
    from tokpack.bpe.records import Challenge, Proof

    claimed = _read(Proof, proof_path)
    record = _read(Challenge, challenge)
    assert isinstance(claimed, Proof) and isinstance(record, Challenge)
    columns = [TextColumn("replaying with the reference"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=_err(), transient=True) as bar:
        task = bar.add_task("steps", total=None)
        try:
            outcome = verify_proof(
                claimed, record, ignore_expiry=ignore_expiry, limits=_limits(max_corpus_bytes, max_merges),
                progress=lambda step: bar.update(task, completed=step),
            )
        except ChallengeRefused as error:  # reported in this command's flags, as every library error is
            raise ChallengeRefused(error.what, where=challenge, fix=error.fix) from None
        except ValueError as error:
            raise _fail(f"{challenge}: {error}") from None
    if outcome.valid:
        _out().print(f"valid: {len(claimed.merges)} merges match the reference for challenge {record.challenge_id}")
        return
    _show_divergence(outcome, proof_path)
    raise typer.Exit(1)


def _show_divergence(outcome: Verification, proof_path: Path) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from tokpack.bpe.explain import describe
    from tokpack.bpe.reference import token_table

    if outcome.step is None:
        _out().print(f"[red]divergence[/red]: {proof_path} does not answer this challenge: {outcome.problem}")
        return
    _out().print(f"[red]divergence at step {outcome.step}[/red] ({outcome.problem}); later steps may only follow from it")
    table = token_table(outcome.agreed)
    rows = Table("", "left_id", "right_id", "result_id", "frequency", "actual count")
    for name, row, count in (
        ("reference", outcome.expected, outcome.expected_count),
        ("proof", outcome.claimed, outcome.claimed_count),
    ):
        rows.add_row(name, *_row_cells(row, count))
    _out().print(rows)
    for name, row in (("reference", outcome.expected), ("proof", outcome.claimed)):
        if row is not None:
            _out().print(escape(f"{name} row joins {describe([row.left_id, row.right_id], table)}"))
    for name, row, excerpts in (
        ("reference", outcome.expected, outcome.expected_excerpts),
        ("proof", outcome.claimed, outcome.claimed_excerpts),
    ):
        if row is None:
            continue
        pair = f"({row.left_id}, {row.right_id})"
        if not excerpts:
            _out().print(f"{name} pair {pair} does not occur in the sequences at step {outcome.step}")
        for excerpt in excerpts:
            where = f"{name} pair {pair} in document {excerpt.document} at position {excerpt.position}: "
            _out().print(Text(where) + _excerpt_text(excerpt, table))


def _row_cells(row: TraceRow | None, count: int | None) -> list[str]:
    if row is None:
        return ["(no row)", "", "", "", ""]
    return [str(row.left_id), str(row.right_id), str(row.result_id), str(row.frequency), str(count)]


def _excerpt_text(excerpt: Excerpt, table: list[bytes]) -> Text:
    from rich.text import Text

    from tokpack.bpe.explain import describe

    return Text.assemble(
        describe(excerpt.before, table) + " " if excerpt.before else "",
        ("[" + describe(excerpt.pair, table) + "]", "bold"),
        " " + describe(excerpt.after, table) if excerpt.after else "",
    )


@bpe_app.command()
def explain(
    texts: Annotated[list[str], typer.Argument(help="The documents, one per argument (each its own byte sequence).")],
    merges: Annotated[int, typer.Option("--merges", "-n", min=0, help="How many merges to show.")] = 3,
    top: Annotated[int, typer.Option(min=1, help="How many pairs of the counts table to show.")] = 5,
) -> None:
    """Show each merge as on paper: the counts (tie rule applied), the winner, the sequences before and after."""
    from rich.markup import escape
    from rich.table import Table

    from tokpack.bpe.explain import describe, label, walk
    from tokpack.bpe.reference import token_table

    steps = list(walk(texts, merges, top=top))
    for step in steps:
        table = token_table([s.winner for s in steps[: step.step]])
        _out().rule(escape(f"step {step.step}: {step.winner} -> {step.new_id} = {label(step.new_id, table)}"))
        counts = Table("pair", "tokens", "count", title="pair counts: highest first, ties to the smallest pair")
        for pair, count in step.ranked:
            mark = "  <- winner" if pair == step.winner else ""
            counts.add_row(str(pair), escape(describe(pair, table)), f"{count}{mark}")
        _out().print(counts)
        if len(step.tied) > 1:
            _out().print(f"tie at count {step.frequency} between {len(step.tied)} pairs: the smallest, {step.winner}, wins")
        _out().print(f"merge {step.winner} -> {step.new_id}: frequency {step.frequency}, replaced {step.replaced} times")
        for number, (before, after) in enumerate(zip(step.before, step.after)):
            _out().print(escape(f"  doc {number}: {before} -> {after}"))
    if len(steps) < merges:
        _out().print(f"no pair left after {len(steps)} merges: training stops here")

