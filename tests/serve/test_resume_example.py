"""examples/train_gpt.py resumed under change, as a user runs it: settings left out come from the
checkpoint, an impossible change is one line and exit 2 before the model is loaded, and every
change the run makes is printed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")

from tokpack.serve import Mixture, PackedBatches
from tokpack.serve.memory import pack_of_documents

from conftest import REPO
from example_runs import run_example

EXAMPLE = REPO / "examples" / "train_gpt.py"
TINY = ["--length", "8", "--layers", "1", "--width", "16", "--heads", "2", "--threads", "1"]


def pack(folder: Path, name: str, first: int, n_ids: int) -> Path:
    ids = np.arange(first, first + n_ids) % 97 + 1
    documents = [ids[i : i + 23].tolist() for i in range(0, n_ids, 23)]
    return pack_of_documents(documents, n_vocab=100, pad_id=0, directory=folder / name)


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("packs")
    return {"py": pack(folder, "py", 0, 900), "lic": pack(folder, "lic", 50, 400)}


def run(*arguments: object, cache: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", TOKPACK_CACHE=str(cache))
    return run_example(EXAMPLE, arguments, env=env)


@pytest.fixture(scope="module")
def saved(packs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-step checkpoint of a two-part mixture at global batch 4 on a tiny model."""
    folder = tmp_path_factory.mktemp("saved")
    done = run("--mixture", f"{packs['py']}=0.5", "--mixture", f"{packs['lic']}=0.5",
               "--global-batch", "4", "--steps", "4", "--save", folder / "m.pt", *TINY, cache=folder / "cache")
    assert done.returncode == 0, done.stderr
    return folder / "m.pt"


def torch_load(path: Path) -> dict:
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def test_a_mixture_needs_no_data_flag_and_its_checkpoint_is_read_by_tokpack_serve(saved: Path, packs: dict[str, Path]) -> None:
    import torch

    checkpoint = torch.load(saved, map_location="cpu", weights_only=True)  # tensors and plain records: PyTorch's default load
    assert checkpoint["arguments"]["data"] == str(packs["py"])  # --data (the validation range): the first part
    assert checkpoint["arguments"]["mixture"] == [(str(packs["py"]), 0.5), (str(packs["lic"]), 0.5)]
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "tokpack.cli", "serve", "which", str(packs["py"]), str(packs["lic"]),
                           "--state", str(saved), "--step", "3", "--json"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=path), timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    served = Mixture([(packs["py"], 0.5), (packs["lic"], 0.5)])
    expected = PackedBatches(served, length=8, global_batch=4, seed=0).provenance(3)
    assert [row["segments"] for row in json.loads(done.stdout)["rows"]] == json.loads(json.dumps(expected))


def test_a_resume_skips_the_steps_of_a_loss_spike(saved: Path, packs: dict[str, Path], tmp_path: Path) -> None:
    done = run("--resume", saved, "--steps", "9", "--skip", "5:7", "--threads", "1", "--log-batches", tmp_path / "log.txt",
               "--save", tmp_path / "n.pt", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "step      5  skipping steps 5-6" in done.stdout
    logged = [line.split() for line in (tmp_path / "log.txt").read_text().splitlines()]
    assert [int(line[0]) for line in logged] == [4, 7, 8]
    straight = PackedBatches(Mixture([(packs["py"], 0.5), (packs["lic"], 0.5)]), length=8, global_batch=4, seed=0)
    for step, digest, *_ in logged:  # the steps trained are the ones a run that trained 5 and 6 served
        ids = np.ascontiguousarray(straight.global_rows(int(step))[:, :-1], dtype="<i8")
        assert hashlib.sha256(ids.tobytes()).hexdigest() == digest
    loader = torch_load(tmp_path / "n.pt")["loader"]
    assert loader["step"] == 9 and loader["skipped"] == [[5, 7]]
    trained = run("--resume", saved, "--steps", "9", "--skip", "2:5", "--threads", "1", cache=tmp_path)
    assert trained.returncode == 2 and len(trained.stderr.strip().splitlines()) == 1, trained.stderr
    assert "--skip 2:5" in trained.stderr and "step 4" in trained.stderr
    malformed = run("--resume", saved, "--steps", "9", "--skip", "7-5", "--threads", "1", cache=tmp_path)
    assert malformed.returncode == 2 and "--skip '7-5': expected START:END" in malformed.stderr


def test_resume_keeps_the_checkpoints_settings(saved: Path, tmp_path: Path) -> None:
    # Only --resume and --steps: the mixture, global batch, length and model come from the checkpoint.
    done = run("--resume", saved, "--steps", "6", "--threads", "1", "--save", tmp_path / "n.pt", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stdout.splitlines() if line.split()[:2] == ["step", "4"]]  # no change printed
    history = torch_load(tmp_path / "n.pt")["data_schedule"]["history"]
    assert [(s["global_batch"], s["weights"]) for s in history] == [(4, [0.5, 0.5])]


def test_resume_prints_what_changes(saved: Path, packs: dict[str, Path], tmp_path: Path) -> None:
    done = run("--resume", saved, "--steps", "6", "--threads", "1", "--global-batch", "6",
               "--mixture", f"{packs['py']}=0.8", "--mixture", f"{packs['lic']}=0.2", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "global batch 4 -> 6" in done.stdout
    assert "part py weight 0.5 -> 0.8" in done.stdout and "part lic weight 0.5 -> 0.2" in done.stdout
    removed = run("--resume", saved, "--steps", "6", "--threads", "1", "--mixture", f"{packs['py']}=1", cache=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert "part lic removed 0.5 -> 0" in removed.stdout


@pytest.mark.parametrize(("flag", "value"), [("--length", 16), ("--width", 32), ("--layers", 2)])
def test_a_changed_shape_is_one_line(saved: Path, tmp_path: Path, flag: str, value: int) -> None:
    done = run("--resume", saved, "--steps", "6", "--threads", "1", flag, value, cache=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_steps_not_past_the_checkpoint_are_refused(saved: Path, tmp_path: Path) -> None:
    done = run("--resume", saved, "--steps", "4", "--threads", "1", "--save", tmp_path / "n.pt", cache=tmp_path)
    assert done.returncode == 2 and "--steps 4" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "n.pt").exists()


# -- the library under the example: parts matched by their ids, one order in every record --------


def loader(*parts: tuple[Path, float], state: dict | None = None, global_batch: int = 4) -> PackedBatches:
    batches = PackedBatches(Mixture(list(parts)), length=8, global_batch=global_batch, seed=1)
    if state is not None:
        batches.load_state_dict(state)
    return batches


def test_a_renamed_folder_continues_its_epoch(packs: dict[str, Path], tmp_path: Path) -> None:
    straight = loader((packs["py"], 0.5), (packs["lic"], 0.5))
    saved = loader((packs["py"], 0.5), (packs["lic"], 0.5))
    saved.step = 5
    renamed = tmp_path / "python"
    shutil.copytree(packs["py"], renamed)
    resumed = loader((renamed, 0.5), (packs["lic"], 0.5), state=saved.state_dict())
    assert [(e["name"], e.get("removed", False)) for e in resumed.repeats()] == [("python", False), ("lic", False)]
    assert resumed.repeats()[0]["rows"] == saved.repeats()[0]["rows"] > 0
    for step in range(5, 12):  # the batches an uninterrupted run serves
        assert np.array_equal(resumed.global_rows(step), straight.global_rows(step))


def test_two_folders_of_one_name_are_told_apart_by_their_ids(packs: dict[str, Path], tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "train", tmp_path / "b" / "train"
    shutil.copytree(packs["py"], first)
    shutil.copytree(packs["lic"], second)
    straight = loader((first, 0.5), (second, 0.5))
    saved = loader((first, 0.5), (second, 0.5))
    saved.step = 5
    swapped = loader((second, 0.5), (first, 0.5), state=saved.state_dict())
    for step in range(5, 12):
        assert np.array_equal(swapped.global_rows(step), straight.global_rows(step))


def test_data_schedule_and_repeats_use_one_order(packs: dict[str, Path]) -> None:
    saved = loader((packs["lic"], 0.5), (packs["py"], 0.5))
    saved.step = 5
    resumed = loader((packs["py"], 0.9), (packs["lic"], 0.1), state=saved.state_dict())
    schedule = resumed.data_schedule()
    names = [part["name"] for part in schedule["parts"]]
    assert names == ["lic", "py"] == [entry["name"] for entry in resumed.repeats()]
    assert [part["weight"] for part in schedule["parts"]] == pytest.approx([0.1, 0.9])
    assert [s["weights"] for s in schedule["history"]] == [pytest.approx([0.5, 0.5]), pytest.approx([0.1, 0.9])]
    stages = [(start, [round(w, 9) for w in weights]) for start, weights in schedule["stages"]]
    assert stages == [(0, [0.5, 0.5]), (5, [0.1, 0.9])]  # the new weights from the resume's step, not from 0
    assert [s["rows"] for s in schedule["stats"]] == [float(resumed.repeats()[1]["rows"]), float(resumed.repeats()[0]["rows"])]


def test_help_names_the_rows_column_and_the_history(tmp_path: Path) -> None:
    shown = " ".join(run("--help", cache=tmp_path).stdout.split())
    assert "STEP SHA256-of-global-input_ids LOSS ROWS" in shown
    assert "the history of settings before k" in shown


def test_prepare_warns_of_an_empty_validation_range(tmp_path: Path) -> None:
    # The last document is far larger than 2% of the file: the validation boundary falls at its end.
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"line {i}\n" * 40 + "<|endoftext|>" for i in range(5)) + ("y" * 59 + "\n") * 50)
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, TOKPACK_CACHE=str(tmp_path / "cache"))

    def prepare(*extra: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "c.txt.manifest.json").unlink(missing_ok=True)
        return subprocess.run([sys.executable, "-m", "tokpack.cli", "prepare", str(corpus), "--vocab-size", "260",
                               "--separator", "<|endoftext|>", "--validation", "0.02", *extra],
                              capture_output=True, text=True, env=env, timeout=600, check=False)

    empty = prepare("-o", str(tmp_path / "empty"))
    assert empty.returncode == 0, empty.stderr
    assert "warning: the 'validation' range of" in empty.stderr and "holds no document" in empty.stderr
    # The manifest pins the cut: the warning says to delete it before the smaller --document-bytes.
    assert f"delete {tmp_path / 'c.txt.manifest.json'} and cut again with a smaller --document-bytes" in empty.stderr
    cut = prepare("-o", str(tmp_path / "cut"), "--document-bytes", "200")  # the fix the warning names
    assert cut.returncode == 0, cut.stderr
    assert "warning" not in cut.stderr
