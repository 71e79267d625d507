"""``tokpack serve which`` and ``tokpack serve when``: what a training step was made of, and when a
document was trained, read from a run's loader state or data schedule."""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from tokpack.cli._console import command_group, stdout
from tokpack.errors import InputError

if TYPE_CHECKING:
    from tokpack.serve import PackedBatches

serve_app = command_group("What a training run's batches hold: which data made a step, and when a document was trained.")

DataArgument: Any = typer.Argument(..., metavar="DATA", help="The run's data: every pack or sharded dataset it was trained on "
                                   "(recognised by their ids, whatever their folders are called now).")
StateOption: Any = typer.Option(..., "--state", metavar="STATE", help="The run's loader state (state_dict()) or data schedule "
                                "(data_schedule()), as JSON, or a PyTorch checkpoint holding one.")
JsonOption: Any = typer.Option(False, "--json", help="Print JSON (for scripts) instead of a table.")
#: What a loader state and a data schedule are called in their records.
STATE_SCHEMAS = ("tokpack.loader.v3", "tokpack.loader.v2", "tokpack.serve-schedule.v2")


def which_command(
    data: list[Path] = DataArgument,
    state: Path = StateOption,
    step: int = typer.Option(..., "--step", min=0, metavar="N", help="The training step to explain."),
    world_size: Optional[int] = typer.Option(None, "--world-size", min=1, metavar="W", help="Also give each row's rank among this many (rank r of W trains rows [r*B/W, (r+1)*B/W))."),
    text: bool = typer.Option(False, "--text", help="Also print each segment's text, decoded with the vocabulary the data carries."),
    as_json: bool = JsonOption,
) -> None:
    """Which data made a step: each row of its global batch, as the documents (and the bytes of
    the files they came from) its ids were read from, computed without serving the batch; and
    whether the run trained it, skipped it, or had not reached it by the state's step."""
    batches = _replaying(data, state)
    rows = batches.provenance(step)
    decode = _decoder(batches) if text else None
    if world_size and len(rows) % world_size:
        raise InputError(f"--world-size {world_size} does not divide step {step}'s global batch of {len(rows)} rows")
    share = len(rows) // world_size if world_size else None
    records = []
    for number, segments in enumerate(rows):
        row: dict[str, Any] = {"row": number, "segments": [_plain(segment, batches, decode) for segment in segments]}
        if share:
            row["rank"] = number // share
        records.append(row)
    reached = batches.position  # the state's step
    status = ("skipped" if any(start <= step < end for start, end in batches.skipped)
              else "planned" if step >= reached else "trained")
    if as_json:
        typer.echo(json.dumps({"step": step, "status": status, "global_batch": len(rows), "rows": records}, indent=2))
        return
    from rich.table import Table

    said = {"trained": "", "skipped": " (skipped: the run did not train it)",
            "planned": f" (planned: not trained by the state's step {reached:,})"}[status]
    table = Table(title=f"step {step:,}: {len(rows):,} rows{said}", title_justify="left")
    for column in ("row", *(["rank"] if share else []), "part", "document", "ids", "source", *(["text"] if text else [])):
        table.add_column(column, overflow="fold")
    for row in records:
        for index, segment in enumerate(row["segments"]):
            first = index == 0
            cells = [str(row["row"]) if first else "", *([str(row["rank"]) if first else ""] if share else [])]
            if segment["part"] is None:
                cells += ["padding", "", f"{segment['tokens'][1]:,}", ""]
            else:
                start, end = segment["tokens"]
                cells += [segment["part"], f"{segment['document']:,}", f"{start:,}-{end:,}", _place(segment["source"])]
            if text:
                cells.append(repr(segment.get("text", ""))[1:-1][:80])
            table.add_row(*cells)
    stdout().print(table)


def when_command(
    data: list[Path] = DataArgument,
    state: Path = StateOption,
    part: Optional[str] = typer.Option(None, "--part", metavar="P", help="The part the document is in, by the name the state gives it (not needed for one part)."),
    document: int = typer.Option(..., "--document", min=0, metavar="D", help="The document's index in its part (as 'tokpack inspect --decode' numbers them)."),
    epochs: int = typer.Option(1, "--epochs", min=1, metavar="E", help="Look through the part's first this many epochs."),
    planned: bool = typer.Option(False, "--planned", help="Also list the steps from the state's step on: those the "
                                 "run will train the document at if it goes on with the same settings."),
    as_json: bool = JsonOption,
) -> None:
    """When a document was trained: every step and row of the global batch before the state's
    step where its ids are targets (with --planned, also the steps after), computed from the
    layout and the history of settings, without serving a batch."""
    batches = _replaying(data, state)
    if part is None:
        if len(batches.names) > 1:
            raise InputError(f"--part is needed: the run has {len(batches.names)} parts ({', '.join(batches.names)})")
        part = batches.names[0]
    if part not in batches.names:
        raise InputError(f"--part {part}: the data given holds {', '.join(batches.names)}")
    reached = batches.position  # the state's step: the run trained the steps before it
    everything = [{**entry, "trained": entry["step"] < reached} for entry in batches.when(part, document, epochs=epochs)]
    found = everything if planned else [entry for entry in everything if entry["trained"]]
    later = sum(not entry["trained"] for entry in everything)
    if as_json:
        typer.echo(json.dumps({"part": part, "document": document, "epochs": epochs, "state_step": reached,
                               "at": [{**entry, "tokens": list(entry["tokens"])} for entry in found]}, indent=2))
        return
    trained = len(everything) - later
    summary = (f"document {document:,} of {part}, first {epochs} epoch(s): {trained:,} row{'s' * (trained != 1)} "
               f"trained before step {reached:,} (the state's step)")
    if later:
        summary += f"; {later:,} more planned from step {reached:,} on" + ("" if planned else " (--planned lists them)")
    stdout().print(summary + ("" if found else "; steps the run skipped do not count"), soft_wrap=True)
    if not found:
        return
    from rich.table import Table

    table = Table()
    for column in ("step", "row", "ids (targets)", *(["trained"] if planned else [])):
        table.add_column(column)
    for entry in found:
        table.add_row(f"{entry['step']:,}", str(entry["row"]), f"{entry['tokens'][0]:,}-{entry['tokens'][1]:,}",
                      *(["yes" if entry["trained"] else "planned"] if planned else []))
    stdout().print(table)


def _replaying(data: list[Path], state: Path) -> PackedBatches:
    from tokpack.serve import PackedBatches

    return PackedBatches.replaying(data, read_state(state))


def read_state(path: Path) -> dict[str, Any]:
    """The loader state or data schedule in ``path``: a JSON record, or a checkpoint (JSON, or
    PyTorch's ``torch.save``) holding one among its values; a loader state is preferred.

    Raises:
        InputError: the file is unreadable or holds neither.
    """
    from tokpack._files import regular_file

    regular_file(Path(path), "--state")
    raw = Path(path).read_bytes()
    try:
        found: Any = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        found = _torch_checkpoint(Path(path))
    candidates = [found] + (list(found.values()) if isinstance(found, dict) else [])
    states = [c for c in candidates if isinstance(c, dict) and c.get("schema") in STATE_SCHEMAS]
    if not states:
        keys = ", ".join(map(str, list(found)[:8])) if isinstance(found, dict) else type(found).__name__
        raise InputError(f"holds no tokpack loader state or data schedule (found: {keys})", where=path,
                         fix="pass the JSON of state_dict() or data_schedule(), or a checkpoint that holds one")
    states.sort(key=lambda c: STATE_SCHEMAS.index(c["schema"]))
    return dict(states[0])


def _torch_checkpoint(path: Path) -> Any:
    try:
        import torch
    except ImportError:
        raise InputError("is not JSON, and reading a PyTorch checkpoint needs torch", where=path,
                         fix="pip install 'tokpack[torch]', or save the state as JSON") from None
    # Paths are data (training scripts keep their arguments beside the state); any other object
    # would need unpickling code from the file, which a tool reading a checkpoint must not run.
    paths = [pathlib.PurePath, pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.Path, pathlib.PosixPath,
             pathlib.WindowsPath]
    allowed = getattr(torch.serialization, "safe_globals", None)
    try:
        with allowed(paths) if allowed is not None else contextlib.nullcontext():
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many kinds for a file that is not its own
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
        refused = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        if refused:
            name = refused.group(1)
            article = "an" if name[:1].lower() in "aeiou" else "a"
            raise InputError(f"holds {article} {name}, which torch.load(weights_only=True) does not read (unpickling "
                             "it could run code)", where=path,
                             fix="save the loader state as JSON (json.dump(loader.state_dict(), file)), or keep only "
                                 "tensors and plain values in the checkpoint") from None
        # torch's own reason, without its advice to load the file unsafely
        reason = text.partition("WeightsUnpickler error:")[2].strip() or f"{type(error).__name__}: {text.strip()}"
        raise InputError(f"is neither JSON nor a PyTorch checkpoint ({reason.splitlines()[0][:120]})", where=path) from None


def _decoder(batches: PackedBatches) -> Any:
    from tokpack.vocab.loading import load_vocabulary

    for name, source in zip(batches.names, batches.sources):
        if source.vocabulary.scheme != "bytelevel-bpe":  # chess schemes and bare ids carry no text vocabulary
            raise InputError(f"--text spells ids with the text vocabulary a pack carries: part {name} holds "
                             f"{source.vocabulary.scheme!r} ids", where=source.path,
                             fix="leave --text out (each segment still names its document and where it came from)")
    tokenizers = {name: load_vocabulary(Path(source.path)) for name, source in zip(batches.names, batches.sources)}
    return lambda name, ids: tokenizers[name].decode(ids)


def _plain(segment: dict[str, Any], batches: PackedBatches, decode: Any) -> dict[str, Any]:
    """A segment as JSON holds it (lists for tuples), with its text when asked for."""
    out = {key: list(value) if isinstance(value, tuple) else value for key, value in segment.items()}
    if decode is not None and segment["part"] is not None:
        source = batches.sources[batches.names.index(segment["part"])]
        out["text"] = decode(segment["part"], source.read_span(*segment["tokens"]).tolist())
    return out


def _place(source: list[Any] | None) -> str:
    """Where a segment came from, in a few words."""
    if source is None:
        return "not recorded"
    if len(source) == 2:
        return f"{source[0]} game {source[1]:,}"
    if len(source) == 4:
        return f"{source[0]} record {source[1]:,} bytes {source[2]:,}-{source[3]:,}"
    return f"{source[0]} bytes {source[1]:,}-{source[2]:,}"


def register(app: typer.Typer) -> None:
    """Add ``tokpack serve which`` and ``tokpack serve when`` to ``app``."""
    serve_app.command("which")(which_command)
    serve_app.command("when")(when_command)
    app.add_typer(serve_app, name="serve")
