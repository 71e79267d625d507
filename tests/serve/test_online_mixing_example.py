"""examples/online_mixing.py: weights changed every N steps from the parts' losses, recorded in the
loader's history, and a run checkpointed halfway and resumed sees the batches and weights of the
run that went straight through."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")

import torch

import tokpack

from conftest import REPO
from example_runs import run_example

EXAMPLE = REPO / "examples" / "online_mixing.py"


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two packs of one vocabulary: the sample, and its lines reversed."""
    root = tmp_path_factory.mktemp("mixing")
    corpus = tokpack.prepare(tokpack.sample_corpus(), cache_dir=root / "cache", vocab_size=300, document_bytes=1024,
                             out=root / "pl")
    text = tokpack.sample_corpus().read_text(encoding="utf-8")
    (root / "lines.txt").write_text("\n".join(sorted(text.splitlines())), encoding="utf-8")
    other = tokpack.prepare(root / "lines.txt", cache_dir=root / "cache", vocab=corpus.vocabulary_path,
                            document_bytes=1024, out=root / "sorted")
    return [f"pl={corpus.tokens_dir}", f"sorted={other.tokens_dir}"]


def run(*arguments: object) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    return run_example(EXAMPLE, arguments, env=dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1"))


def test_a_resumed_run_replays_the_batches_and_the_weights_it_set(parts: list[str], tmp_path: Path) -> None:
    mixture = [word for part in parts for word in ("--mixture", part)]
    settings = ["--every", 4, "--step-size", 20, "--length", 32, "--global-batch", 8]
    straight = run(*mixture, *settings, "--steps", 20, "--log", tmp_path / "straight.log")
    assert straight.returncode == 0, straight.stderr
    first = run(*mixture, *settings, "--steps", 10, "--save", tmp_path / "run.pt", "--log", tmp_path / "resumed.log")
    assert first.returncode == 0, first.stderr
    second = run("--steps", 20, "--resume", tmp_path / "run.pt", "--log", tmp_path / "resumed.log")
    assert second.returncode == 0, second.stderr
    lines = (tmp_path / "straight.log").read_text().splitlines()
    assert len(lines) == 20 and (tmp_path / "resumed.log").read_text().splitlines() == lines
    weights = [tuple(line.split()[2:]) for line in lines]
    assert weights[0] == ("0.500000", "0.500000") and len(set(weights)) > 2  # changed at steps 4, 8, 12, 16
    assert "step 4: weights" in straight.stdout
    history = torch.load(tmp_path / "run.pt", weights_only=False)["loader"]["history"]
    assert [segment["step"] for segment in history] == [0, 4, 8]
    again = run("--steps", 10, "--resume", tmp_path / "run.pt")
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "--steps 10 is not past" in again.stderr
