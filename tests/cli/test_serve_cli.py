"""``tokpack serve which`` and ``tokpack serve when``: a run's step and a document's steps, read
from its loader state, its data schedule or a PyTorch checkpoint holding one; equal to what the
library says; mistakes one line and exit code 2."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import tokpack
from tokpack.cli import _console, app
from tokpack.serve import Mixture, PackedBatches

from conftest import SAMPLE

runner = CliRunner()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A mixture of two packs of the sample (one moved to a folder of another name since), trained
    12 steps with a set of weights on the way and three steps skipped; its state, schedule and checkpoint."""
    root = tmp_path_factory.mktemp("run")
    corpus = tokpack.prepare(SAMPLE / "polish.txt", cache_dir=root / "cache", vocab_size=300, document_bytes=1024,
                             out=root / "polish")
    text = (SAMPLE / "polish.txt").read_text(encoding="utf-8")
    (root / "reversed.txt").write_text("\n".join(reversed(text.splitlines())), encoding="utf-8")
    other = tokpack.prepare(root / "reversed.txt", cache_dir=root / "cache", vocab=corpus.vocabulary_path,
                            document_bytes=1024, out=root / "reversed")
    batches = PackedBatches(Mixture([(corpus.tokens_dir, 0.6), (other.tokens_dir, 0.4)], seed=3, names=["pl", "rev"]),
                            length=32, global_batch=8, seed=1)
    for _ in zip(range(5), batches):
        pass
    batches.set_weights(6, [0.2, 0.8])
    batches.skip(8, 11)
    for _ in zip(range(7), batches):
        pass
    (root / "state.json").write_text(json.dumps(batches.state_dict()), encoding="utf-8")
    (root / "schedule.json").write_text(json.dumps(batches.data_schedule(run="test")), encoding="utf-8")
    torch.save({"model": {}, "loader": batches.state_dict()}, root / "checkpoint.pt")
    # training scripts keep their arguments beside the state: paths, or whole objects
    torch.save({"loader": batches.state_dict(), "arguments": {"data": root / "polish"}}, root / "paths.pt")
    torch.save({"loader": batches.state_dict(), "arguments": argparse.Namespace(data="polish")}, root / "namespace.pt")
    (root / "reversed").rename(root / "moved")
    return {"root": root, "pl": corpus.tokens_dir, "rev": root / "moved"}


def test_text_of_ids_no_text_vocabulary_spells_is_refused_naming_them(tmp_path: Path) -> None:
    from tokpack.serve.memory import pack_of_documents

    pack = pack_of_documents([[1, 2, 3, 4], [5, 6, 7]], n_vocab=9, pad_id=0, directory=tmp_path / "games")
    batches = PackedBatches(pack, length=2, global_batch=2, seed=0)
    batches.batch(0)
    (tmp_path / "state.json").write_text(json.dumps(batches.state_dict()), encoding="utf-8")
    code, out = invoke("serve", "which", pack, "--state", tmp_path / "state.json", "--step", 0, "--text")
    assert code == 2, out
    assert "--text spells ids with the text vocabulary a pack carries: part games holds 'list' ids" in out
    assert "older tokpack" not in out and out.count("\n") <= 2
    code, out = invoke("serve", "which", pack, "--state", tmp_path / "state.json", "--step", 0)
    assert code == 0, out


@pytest.fixture(autouse=True)
def not_debugging(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_console, "debug", False)


def invoke(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def replayed(run: dict[str, Path]) -> PackedBatches:
    return PackedBatches.replaying([run["pl"], run["rev"]], json.loads((run["root"] / "state.json").read_text()))


@pytest.mark.parametrize("state", ["state.json", "schedule.json", "checkpoint.pt", "paths.pt"])
def test_which_gives_each_row_of_a_step_as_the_library_does(run: dict[str, Path], state: str) -> None:
    code, out = invoke("serve", "which", run["pl"], run["rev"], "--state", run["root"] / state, "--step", 7, "--json",
                       "--world-size", 2, "--text")
    assert code == 0, out
    record = json.loads(out)
    expected = replayed(run).provenance(7)
    assert record["global_batch"] == 8 and [row["rank"] for row in record["rows"]] == [0] * 4 + [1] * 4
    assert [[{k: v for k, v in s.items() if k != "text"} for s in row["segments"]] for row in record["rows"]] == json.loads(
        json.dumps(expected))
    sample = SAMPLE.joinpath("polish.txt").read_bytes()
    for row in record["rows"]:
        for segment in row["segments"]:
            if segment["part"] == "pl":
                name, start, end = segment["source"]
                assert name == "polish.txt" and sample[start:end].decode("utf-8") == segment["text"]


@pytest.mark.parametrize(("step", "status", "said"), [(7, "trained", ""), (9, "skipped", "skipped: the run did not train it"),
                                                   (15, "planned", "planned: not trained by the state's step 15")])
def test_which_says_whether_the_run_trained_the_step(run: dict[str, Path], step: int, status: str, said: str) -> None:
    code, out = invoke("serve", "which", run["pl"], run["rev"], "--state", run["root"] / "state.json", "--step", step, "--json")
    assert code == 0, out
    assert json.loads(out)["status"] == status
    code, out = invoke("serve", "which", run["pl"], run["rev"], "--state", run["root"] / "state.json", "--step", step)
    assert code == 0, out
    assert f"step {step}: 8 rows" in out and said in " ".join(out.split())


def test_which_prints_a_table_naming_files_and_bytes(run: dict[str, Path]) -> None:
    code, out = invoke("serve", "which", run["pl"], run["rev"], "--state", run["root"] / "state.json", "--step", 0)
    assert code == 0, out
    assert "step 0: 8 rows" in out and "polish.txt" in out and "reversed.txt" in out


def test_when_gives_the_steps_of_a_document_as_the_library_does(run: dict[str, Path]) -> None:
    code, out = invoke("serve", "when", run["pl"], run["rev"], "--state", run["root"] / "schedule.json", "--part", "rev",
                       "--document", 4, "--epochs", 2, "--json", "--planned")
    assert code == 0, out
    record = json.loads(out)
    assert record["state_step"] == 15
    found = record["at"]
    assert [{k: v for k, v in entry.items() if k != "trained"} for entry in found] == json.loads(
        json.dumps(replayed(run).when("rev", 4, epochs=2)))
    assert all(entry["trained"] == (entry["step"] < 15) for entry in found)
    assert found and not {entry["step"] for entry in found} & {8, 9, 10}  # skipped steps trained nothing


def test_when_lists_the_steps_the_run_trained_before_its_state_unless_asked_for_the_plan(run: dict[str, Path]) -> None:
    everything = replayed(run).when("pl", 0, epochs=3)
    trained = [entry for entry in everything if entry["step"] < 15]
    assert trained and len(trained) < len(everything)  # the state's run is in the middle of the document's rows
    code, out = invoke("serve", "when", run["pl"], run["rev"], "--state", run["root"] / "state.json", "--part", "pl",
                       "--document", 0, "--epochs", 3, "--json")
    assert code == 0, out
    assert [{k: v for k, v in entry.items() if k != "trained"} for entry in json.loads(out)["at"]] == json.loads(
        json.dumps(trained))
    code, out = invoke("serve", "when", run["pl"], run["rev"], "--state", run["root"] / "state.json", "--part", "pl",
                       "--document", 0, "--epochs", 3)
    assert code == 0, out
    assert f"document 0 of pl, first 3 epoch(s): {len(trained)} row{'s' * (len(trained) != 1)} trained before step 15" in out
    assert f"{len(everything) - len(trained)} more planned from step 15 on (--planned lists them)" in out
    code, out = invoke("serve", "when", run["pl"], "--state", run["root"] / "state.json", "--document", 4)
    assert code == 0 and "document 4 of pl" in out


@pytest.mark.parametrize(("args", "message"), [
    (lambda r: ["which", r["pl"], "--state", r["root"] / "cache", "--step", 1], "not a regular file"),
    (lambda r: ["which", r["pl"], "--state", r["pl"] / "meta.json", "--step", 1],
     "holds no tokpack loader state or data schedule"),
    (lambda r: ["which", r["root"] / "cache", "--state", r["root"] / "state.json", "--step", 1], "neither a pack"),
    (lambda r: ["which", r["pl"], "--state", r["root"] / "namespace.pt", "--step", 1],
     "holds an argparse.Namespace, which torch.load(weights_only=True) does not read"),
    (lambda r: ["when", r["pl"], r["rev"], "--state", r["root"] / "state.json", "--document", 1], "--part is needed"),
    (lambda r: ["when", r["pl"], "--state", r["root"] / "state.json", "--part", "x", "--document", 1],
     "--part x: the data given holds pl"),
    (lambda r: ["when", r["pl"], "--state", r["root"] / "state.json", "--document", 10**6], "is not in its 'train' range"),
    (lambda r: ["which", r["pl"], "--state", r["root"] / "state.json", "--step", 1], "served part 'rev'"),
    (lambda r: ["which", r["pl"], r["rev"], "--state", r["root"] / "state.json", "--step", 1, "--world-size", 3],
     "--world-size 3 does not divide step 1's global batch of 8 rows"),
])
def test_a_mistake_is_one_line_and_exit_code_2(run: dict[str, Path], args, message: str) -> None:  # type: ignore[no-untyped-def]
    # The command runs in this process: what another test imported may have widened torch's list of
    # objects it unpickles (megatron.core adds argparse.Namespace on import); the tokpack command's
    # own process starts with torch's own list.
    allowed = torch.serialization.get_safe_globals()
    torch.serialization.clear_safe_globals()
    try:
        code, out = invoke("serve", *args(run))
    finally:
        torch.serialization.add_safe_globals(allowed)
    assert code == 2, out
    assert message in out and out.count("\n") <= 2
