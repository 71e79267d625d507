"""The same inputs give the same bytes: packs, datasets, exports and batches, release after release.

A reorganisation of the code (modules moved, records regrouped, a faster encoder) must not change
a byte of what users keep: their packs, their exported files, the batches a training run sees and
the state it resumes from. This test makes all of them from the repository's data, through the
command line and the public API, and compares their SHA-256 with ``tests/fixtures/same_bytes.json``,
which names the commit that wrote it.

Regenerate the fixture only when a change of output is intended, and say so in the commit:
``python tests/test_same_bytes.py --write``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "same_bytes.json"
# Files whose bytes record when or where they were made, not what they hold: the conversion's
# report and a finished shard's marker (it names its job by the seal of absolute paths).
VOLATILE = {"convert-report.json"}
VOLATILE_SUFFIXES = {".done"}


def _tokpack(*args: str | Path, cwd: Path, cache: Path) -> None:
    env = {**os.environ, "TOKPACK_CACHE": str(cache), "COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-m", "tokpack.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"tokpack {' '.join(map(str, args))}:\n{done.stderr}"


def _file_digest(path: Path, work: Path) -> str:
    data = path.read_bytes()
    if path.name == "job.json":
        # A job names its inputs by absolute path (and seals them): compare it with the folder named.
        job = json.loads(data.decode().replace(str(work), "<work>"))
        job.pop("seal", None)
        data = json.dumps(job, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def _tree(folder: Path, work: Path) -> dict[str, str]:
    return {str(path.relative_to(work)): _file_digest(path, work)
            for path in sorted(folder.rglob("*")) if path.is_file() and path.name not in VOLATILE and path.suffix not in VOLATILE_SUFFIXES}


def _digest(value: Any) -> str:
    """SHA-256 of a batch (dicts of arrays, lists, numbers) in a stable byte form."""
    hasher = hashlib.sha256()

    def feed(item: Any) -> None:
        if isinstance(item, dict):
            for key in sorted(item):
                hasher.update(f"<{key}>".encode())
                feed(item[key])
        elif isinstance(item, (list, tuple)):
            hasher.update(f"[{len(item)}]".encode())
            for element in item:
                feed(element)
        elif hasattr(item, "numpy"):  # a torch tensor
            feed(item.numpy())
        elif isinstance(item, np.ndarray):
            hasher.update(f"{item.dtype.str}{item.shape}".encode())
            hasher.update(np.ascontiguousarray(item).tobytes())
        else:
            hasher.update(json.dumps(item, sort_keys=True, default=str).encode())

    feed(value)
    return hasher.hexdigest()


def _batches(pack: Path, dataset: Path, chess_train: Path) -> dict[str, str]:
    from tokpack.serve import Mixture, PackedBatches, TokenBatches, Windows
    from tokpack.torch import WindowDataset, WindowLoader

    out: dict[str, str] = {}
    for layout in ("stream", "documents", "bestfit"):
        for rank in (0, 1):
            batches = PackedBatches(pack, layout=layout, length=48, global_batch=8, rank=rank,
                                    world_size=2, seed=3)
            out[f"packed/{layout}/rank{rank}"] = _digest([batches.batch(step) for step in range(4)])
            out[f"packed/{layout}/rank{rank}/state"] = _digest(batches.state_dict())
    mixture = Mixture([(pack, 0.7), (dataset, 0.3)], seed=5)
    mixed = PackedBatches(mixture, layout="documents", length=32, global_batch=6)
    out["packed/mixture"] = _digest([mixed.batch(step) for step in range(5)])
    out["packed/mixture/state"] = _digest(mixed.state_dict())
    seed = TokenBatches(pack, batch=4, length=32)
    out["seed/token_batches"] = _digest([seed.ids(step) for step in range(3)])
    with warnings.catch_warnings():  # aligned windows of 40 ids serve only document heads: as intended here
        warnings.simplefilter("ignore", UserWarning)
        windows = Windows(chess_train, block=40)
    out["seed/windows"] = _digest([windows.window_batch([0, 1, 2])])
    loader = WindowLoader(WindowDataset(windows), batch_size=4, seed=7)
    out["seed/window_loader"] = _digest([batch for _, batch in zip(range(3), loader)])
    return out


def fingerprints(work: Path) -> dict[str, str]:
    """Make everything users keep from the repository's data; SHA-256 of each file and batch."""
    cache = work / "cache"
    corpus = work / "polish.txt"
    corpus.write_bytes(b"".join(path.read_bytes() for path in sorted((ROOT / "data/polish/narrative").glob("*.txt"))))
    _tokpack("prepare", corpus, "-o", work / "pack", "--vocab-size", "700", "--validation", "0.1",
             "--document-bytes", "4096", "--workers", "2", cwd=work, cache=cache)
    english = work / "english"
    english.mkdir()
    for path in (ROOT / "data/other/english").glob("*.txt"):
        (english / path.name).write_bytes(path.read_bytes())
    _tokpack("prepare", english, "--vocab", work / "pack", "--shards", "2",
             "-o", work / "dataset", "--workers", "1", cwd=work, cache=cache)
    _tokpack("export", work / "pack", work / "export/megatron/pl", "--format", "megatron", cwd=work, cache=cache)
    _tokpack("export", work / "pack", work / "export/nanogpt", "--format", "nanogpt", cwd=work, cache=cache)
    _tokpack("chess", "convert", ROOT / "tests/fixtures/chess_games.pgn", "-o", work / "games", cwd=work, cache=cache)
    (work / "tokpack-chess.toml").write_text('games_dir = "games"\nout_dir = "tokens"\ntrain_months = "all"\nval_fraction = 0.05\n')
    _tokpack("chess", "tokenize", "--scheme", "uci", "--pack", cwd=work, cache=cache)
    files = {}
    for folder in ("polish.txt.manifest.json", "pack", "dataset", "export", "games", "tokens"):
        path = work / folder
        files.update(_tree(path, work) if path.is_dir() else {folder: _file_digest(path, work)})
    return {**files, **_batches(work / "pack", work / "dataset", work / "tokens/uci/train")}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return fingerprints(tmp_path_factory.mktemp("same-bytes"))


def test_same_files_and_batches_as_recorded(made: dict[str, str]) -> None:
    recorded = json.loads(FIXTURE.read_text())["sha256"]
    assert sorted(made) == sorted(recorded), "a file or batch appeared or vanished"
    changed = [name for name in recorded if made[name] != recorded[name]]
    assert not changed, f"bytes changed: {changed}"


def test_the_fingerprints_cover_every_kind_of_output(made: dict[str, str]) -> None:
    # A fixture that lost a kind of output would compare nothing for it.
    for needed in ("pack/tokens", "dataset/", "export/megatron", "export/nanogpt", "games/", "tokens/uci/train",
                   "pack/vocabulary/", "packed/bestfit/rank1", "packed/mixture/state", "seed/window_loader"):
        assert any(name.startswith(needed) for name in made), needed


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_same_bytes.py --write   (only when a change of output is intended)")
    with tempfile.TemporaryDirectory() as tmp:
        sha = fingerprints(Path(tmp))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    FIXTURE.write_text(json.dumps({"schema": 1, "written_at_commit": commit, "sha256": sha}, indent=1, sort_keys=True) + "\n")
    print(f"{FIXTURE}: {len(sha)} fingerprints from {commit}")
