"""``tokpack tokenizer``: split a corpus, train a byte-level BPE tokenizer, check it is lossless,
grade its compression per domain."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from tokpack.cli._console import TrainerName, command_group
from tokpack.errors import InputError, TokpackError

if TYPE_CHECKING:  # rich and the grading modules are imported by the commands that use them, not by every --help
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from tokpack.grading.grade import GradeReport
    from tokpack.grading.torture import TortureCase

#: ``tokpack.grading.grade.MIN_GLOBAL`` and ``MIN_DOMAIN``, written out so that ``--help`` shows them
#: without importing the grader (tests/cli/test_cli_startup.py holds them equal).
MIN_GLOBAL = 3.30
MIN_DOMAIN = 2.50

app = command_group("Split a corpus, train a byte-level BPE tokenizer, check it is lossless, grade its compression per domain.")


@cache
def _out() -> Console:
    from rich.console import Console

    return Console()


@cache
def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def _fail(message: str) -> typer.Exit:
    """Print a one-line error and return the exit to raise (code 2: bad input)."""
    _err().print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _progress() -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=_err(), transient=True)


@app.command()
def split(
    data_dir: Path = typer.Argument(..., help="Folder of documents, one subfolder per domain."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to create with train/, validation/ and split.json."),
    validation: float = typer.Option(0.1, help="Share of each domain's documents held out for validation."),
    seed: str = typer.Option("tokpack", help="Seed of the document ranking (same seed, same split)."),
    overwrite: bool = typer.Option(False, help="Replace OUT if it exists."),
) -> None:
    """Split DATA_DIR by document, per domain, removing exact and near duplicates across the parts."""
    from rich.table import Table

    from tokpack.grading.split import plan_split, write_split

    try:
        record = plan_split(data_dir, validation=validation, seed=seed)
        write_split(record, out, overwrite=overwrite)
    except ValueError as error:
        raise _fail(str(error)) from None
    table = Table("domain", "documents", "train", "validation", "exact duplicates", "near duplicates",
                  title=f"split of {data_dir} -> {out}")
    for domain, counts in record.domains.items():
        table.add_row(domain, *(str(v) for v in (counts.documents, counts.train, counts.validation,
                                                  counts.exact_duplicates, counts.near_duplicates)))
    _out().print(table)
    for skipped in record.skipped:
        _out().print(f"skipped {skipped.path}: {skipped.reason}", highlight=False)


@app.command()
def train(
    train_dirs: list[Path] = typer.Argument(..., help="Training folder(s), one subfolder per domain."),
    output: Path = typer.Option(..., "--out", "-o", "--output", help="tokenizer.json to write; ranks.tiktoken and vocabulary.json go beside it."),
    vocab_size: int = typer.Option(8192, "--vocab-size", help="Ids in the result, <|endoftext|> included."),
    trainer: TrainerName = typer.Option(TrainerName.exact, "--trainer", help="exact (tokpack's, the default everywhere) or hf (Hugging Face's)."),
    pattern: str = typer.Option("gpt4", help="Pre-tokenizer: gpt2, gpt4, polish, polish-phrase, or a regex (gpt4 by default, as in every trainer)."),
    allow_smaller_vocab: bool = typer.Option(False, "--allow-smaller-vocab", help="Accept fewer ids than --vocab-size when the data cannot reach it (not with --phrase-merges)."),
    domain_weights: str = typer.Option("", help="Per-domain repetition, e.g. 'code=2,technical=0.5' (others 1)."),
    min_frequency: int = typer.Option(2, help="Pairs seen fewer times are never merged."),
    phrase_merges: int = typer.Option(0, help="Ids learned by a second, multi-word stage (0: none)."),
    phrase_pattern: str = typer.Option("polish-phrase", help="Pre-tokenizer of the phrase stage (named or a regex)."),
) -> None:
    """Train a byte-level BPE tokenizer of exactly --vocab-size ids and write it for both libraries."""
    from tokpack._atomic import write_atomically
    from tokpack.grading.manifest import MANIFEST_FILE, UNKNOWN, build_manifest
    from tokpack.grading.training import (
        TrainingRecipe,
        parse_domain_weights,
        train_tokenizer,
        weighted_documents,
        write_tokenizer,
    )
    from tokpack.vocab.patterns import resolve_pattern

    for train_dir in train_dirs:
        if train_dir.is_file():
            raise _fail(f"{train_dir}: a file; tokenizer train reads folders of documents, one subfolder per domain "
                        f"(e.g. DIR/prose/{train_dir.name}): put the file in one (mkdir -p DIR/prose && cp {train_dir} "
                        "DIR/prose/) and pass DIR, or train on the file itself with 'tokpack bpe train FILE -o OUT'")
    try:
        recipe = TrainingRecipe(
            vocab_size=vocab_size, trainer=trainer.value, pattern=resolve_pattern(pattern),
            min_frequency=min_frequency, domain_weights=parse_domain_weights(domain_weights),
            phrase_merges=phrase_merges, phrase_pattern=resolve_pattern(phrase_pattern),
        )
        texts, used = weighted_documents(train_dirs, recipe.domain_weights)
        with _progress() as progress:
            progress.add_task(f"training on {len(used)} files ({sum(map(len, texts)):,} characters)", total=None)
            tokenizer = train_tokenizer(texts, recipe, allow_smaller=allow_smaller_vocab)
        written = write_tokenizer(tokenizer, output)
        manifest = build_manifest(tokenizer, recipe, used, [Path(d) for d in train_dirs], written)
        written.append(write_atomically(output.parent / MANIFEST_FILE, manifest.to_json()))
    except ValueError as error:  # pydantic's ValidationError is one too: a bad --vocab-size...
        if isinstance(error, TokpackError):
            raise  # said in this command's flags, as every command's errors are
        raise _fail(_one_line(error)) from None
    _out().print(f"{tokenizer.n_vocab} ids ({len(tokenizer.ranks)} ranks + <|endoftext|>), identity {tokenizer.identity.short}")
    for path in written:
        _out().print(f"wrote {path}", highlight=False)
    unknown = [source.path for source in manifest.sources if source.licence == UNKNOWN]
    if unknown:
        _err().print(f"[yellow]warning:[/yellow] {len(unknown)} training files have no known licence "
                   f"(first: {unknown[0]}); name them in {MANIFEST_FILE} before shipping", highlight=False)


def _one_line(error: ValueError) -> str:
    from pydantic import ValidationError

    if isinstance(error, ValidationError):
        first = error.errors()[0]
        return f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}"
    return str(error)


@app.command()
def check(
    tokenizer_json: Path = typer.Argument(..., help="The tokenizer.json to check."),
    paths: Optional[list[Path]] = typer.Argument(None, help="Extra files or folders whose text must round-trip too."),
    torture: bool = typer.Option(True, help="Include the built-in torture set."),
) -> None:
    """Round-trip the torture set and PATHS; exit 1 naming the first differing character of any failure."""
    from tokpack.grading.files import corpus_files
    from tokpack.grading.torture import TORTURE_SET, check_round_trip, file_cases, structure_report

    try:
        structure = structure_report(tokenizer_json)
        files: list[Path] = []
        for path in paths or []:
            if path.is_dir():
                listing = corpus_files(path)
                files.extend(listing.files)
                for skipped in listing.skipped:
                    _err().print(f"skipped {skipped.path}: {skipped.reason}", highlight=False)
            elif path.is_file():
                files.append(path)
            else:
                raise InputError("no such file or folder", where=path)
        with _progress() as progress:
            task = progress.add_task("round-tripping", total=(len(TORTURE_SET) if torture else 0) + len(files))
            cases = _advancing(progress, task, (*(TORTURE_SET if torture else ()), *file_cases(files)))
            report = check_round_trip(tokenizer_json, cases)
    except ValueError as error:
        raise _fail(str(error)) from None
    _out().print(structure.summary, highlight=False)
    for problem in structure.problems:
        _out().print(f"[red]FAIL[/red] {problem}", highlight=False, soft_wrap=True)
    for failure in report.failures:
        _out().print(f"[red]FAIL[/red] {failure.name} ({failure.engine}): {failure.detail}", highlight=False, soft_wrap=True)
    verdict = "[green]PASS[/green]" if report.passed and not structure.problems else "[red]FAIL[/red]"
    _out().print(f"{verdict} {report.texts} texts, {report.characters:,} characters, engines: "
               f"{', '.join(report.engines)}; {len(report.failures)} failures", soft_wrap=True)
    if report.failures or structure.problems:
        raise typer.Exit(1)


def _advancing(progress: Progress, task: TaskID, cases: Iterable[TortureCase]) -> Iterator[TortureCase]:
    for case in cases:
        yield case
        progress.advance(task)


@app.command(name="grade")
def grade_command(
    tokenizer: Path = typer.Argument(..., help="tokenizer.json, a .tiktoken rank file, vocabulary.json or a sentencepiece .model."),
    data_dir: Path = typer.Argument(..., help="Folder of documents, one subfolder per domain."),
    min_global: float = typer.Option(MIN_GLOBAL, help="Least characters per token over all text."),
    min_domain: float = typer.Option(MIN_DOMAIN, help="Least characters per token in every domain."),
    json_output: bool = typer.Option(False, "--json", help="Print the report as JSON instead of a table."),
    pattern: Optional[str] = typer.Option(None, help="Pre-tokenizer of a rank file with no vocabulary.json beside it that is no published vocabulary (gpt2, gpt4, polish, polish-phrase, or a regex)."),
) -> None:
    """Characters per token of TOKENIZER on DATA_DIR, globally and per domain; exit 0 pass, 1 fail, 2 bad input."""
    from tokpack import _checks as checks
    from tokpack.grading.grade import grade, load_counter
    from tokpack.vocab.patterns import resolve_pattern

    try:
        for flag, value in (("--min-global", min_global), ("--min-domain", min_domain)):
            checks.finite_float(flag, value, low=0.0)
        counter = load_counter(tokenizer, pattern=resolve_pattern(pattern) if pattern else None)
        with _progress() as progress:
            progress.add_task(f"grading on {data_dir}", total=None)
            report = grade(counter, data_dir, min_global=min_global, min_domain=min_domain)
    except ValueError as error:
        raise _fail(str(error)) from None
    if json_output:
        sys.stdout.write(report.to_json())
    else:
        _print_grade(report)
    if not report.passed:
        raise typer.Exit(1)


def _print_grade(report: GradeReport) -> None:
    from rich.table import Table

    table = Table("domain", "documents", "characters", "tokens", "chars/token", "threshold", "",
                  title=f"{report.tokenizer}: {report.vocab_size} ids on {report.data_dir}")
    for domain in report.domains:
        mark = "ok" if domain.passed else "[red]FAIL[/red]"
        if domain.domain == report.weakest_domain:
            mark += " weakest"
        table.add_row(domain.domain, str(domain.documents), f"{domain.characters:,}", f"{domain.tokens:,}",
                      f"{domain.chars_per_token:.3f}", f">= {report.min_domain:.2f}", mark)
    mark = "ok" if report.chars_per_token >= report.min_global else "[red]FAIL[/red]"
    table.add_row("global", str(report.documents), f"{report.characters:,}", f"{report.tokens:,}",
                  f"{report.chars_per_token:.3f}", f">= {report.min_global:.2f}", mark, style="bold")
    _out().print(table)
    _out().print("[green]PASS[/green]" if report.passed else "[red]FAIL[/red]")
