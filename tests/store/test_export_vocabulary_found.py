"""An export carries its pack's vocabulary, and tokpack finds it there: ``tokpack inspect`` names
the carried folder, ``--decode`` decodes with it and ``tokpack.load_vocabulary`` loads it, for
every export format (a Megatron prefix's ``PREFIX.vocabulary`` too), each file checked against
the export's sidecar first."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import tokpack
from tokpack.cli import app
from tokpack.errors import IntegrityError
from tokpack.store import Pack

from conftest import DATA

FORMATS = ("nanogpt", "litdata", "mds", "hf", "megatron")
runner = CliRunner()


def run(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("carried")
    text = (DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt").read_bytes()[:30_000]
    (folder / "c.txt").write_bytes(text[: text.rindex(b"\n") + 1])
    code, output = run("prepare", folder / "c.txt", "--vocab-size", "300", "--document-bytes", "4000",
                       "-o", folder / "pack", "--cache-dir", folder / "cache")
    assert code == 0, output
    return folder / "pack"


def export(pack: Path, fmt: str, out: Path) -> tuple[Path, Path]:
    """Export ``pack`` as ``fmt`` under ``out``: what to open, and where the vocabulary goes."""
    target = out / "data" / "x_text_document" if fmt == "megatron" else out / fmt
    target.parent.mkdir(parents=True, exist_ok=True)
    code, output = run("export", pack, target, "--format", fmt)
    assert code == 0, output
    carried = target.with_name(target.name + ".vocabulary") if fmt == "megatron" else target / "vocabulary"
    assert (carried / "vocabulary.json").is_file()
    return target, carried


def first_text(pack: Path) -> str:
    opened = Pack(pack)
    ids = opened.take(np.arange(int(opened.starts[0]), int(opened.starts[1])))
    return tokpack.load_vocabulary(pack).decode(ids.tolist())


@pytest.mark.parametrize("fmt", FORMATS)
def test_inspect_and_decode_find_the_vocabulary_an_export_carries(pack: Path, fmt: str, tmp_path: Path) -> None:
    target, carried = export(pack, fmt, tmp_path)
    code, output = run("inspect", target)
    assert code == 0, output
    assert f"vocabulary: {carried} " in output and "not carried" not in output
    code, output = run("inspect", target, "--json")
    assert code == 0 and json.loads(output)["vocabulary_dir"] == str(carried)
    code, output = run("inspect", target, "--decode", "0")
    assert code == 0, output
    expected = first_text(pack)
    assert len(expected) > 100 and expected in output


@pytest.mark.parametrize("fmt", FORMATS)
def test_load_vocabulary_loads_an_exports_carried_vocabulary(pack: Path, fmt: str, tmp_path: Path) -> None:
    target, _ = export(pack, fmt, tmp_path)
    loaded = tokpack.load_vocabulary(target)
    assert loaded.identity == Pack(pack).vocabulary
    assert loaded.encode(first_text(pack)) == tokpack.load_vocabulary(pack).encode(first_text(pack))


@pytest.mark.parametrize("fmt", ("nanogpt", "megatron"))
def test_an_altered_carried_vocabulary_is_refused(pack: Path, fmt: str, tmp_path: Path) -> None:
    target, carried = export(pack, fmt, tmp_path)
    ranks = carried / "ranks.tiktoken"
    ranks.write_bytes(ranks.read_bytes().replace(b" 1\n", b" 2\n", 1).replace(b" 2\n", b" 1\n", 1) + b"\n")
    with pytest.raises(IntegrityError, match="SHA-256 differs"):
        tokpack.load_vocabulary(target)
    code, output = run("inspect", target, "--decode", "0")
    assert code == 2 and output.startswith("error: ") and "ranks.tiktoken" in output
