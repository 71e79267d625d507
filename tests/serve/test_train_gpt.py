"""The real client, examples/train_gpt.py: DDP on CPU, exact resume across world sizes, a falling loss.

Each run is a real process (``python`` or ``torchrun``) on a pack prepared from the bundled sample,
so this checks what a user relies on: the global batch of step k is the same whether one rank or
two train on it, whether the data is one pack or a sharded dataset of the same ids, and whether
the run went straight through or was checkpointed on two ranks and resumed on one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")

import tokpack
from tokpack.engines import prepare_sharded
from tokpack.serve import PackedBatches

from conftest import REPO
from example_runs import run_example, run_torchrun

EXAMPLE = REPO / "examples" / "train_gpt.py"
LENGTH, GLOBAL_BATCH, STEPS, CHECKPOINT_STEP = 32, 8, 12, 5  # tiny: each run is a few seconds of CPU


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tokpack.TokenizedCorpus:
    cache = tmp_path_factory.mktemp("cache")
    return tokpack.prepare(tokpack.sample_corpus(), cache_dir=cache, vocab_size=512, document_bytes=4096)


def run(arguments: list[str], *, cache: Path, ranks: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run the example as a user would: plain ``python`` (``ranks=None``) or ``torchrun``, with
    tokpack's cache (where ``bestfit`` keeps its index) in ``cache``."""
    if ranks is None:
        return run_example(EXAMPLE, [*arguments, "--threads", "1"], env=environment(cache))
    return run_torchrun(EXAMPLE, [*arguments, "--threads", "1"], ranks=ranks, env=environment(cache))


def environment(cache: Path) -> dict[str, str]:
    """This interpreter's environment with the repository's ``src`` first on the path and the
    layout cache in ``cache``."""
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", TOKPACK_CACHE=str(cache))


def log_lines(path: Path) -> list[tuple[int, str, float]]:
    rows = [line.split() for line in path.read_text().splitlines()]
    assert all(len(row) == 4 and int(row[3]) == GLOBAL_BATCH for row in rows), rows  # STEP SHA256 LOSS ROWS
    return [(int(step), digest, float(loss)) for step, digest, loss, _ in rows]


def expected_hashes(corpus: tokpack.TokenizedCorpus, layout: str) -> list[str]:
    """What the library says step k's global inputs are, independently of any run."""
    options = {"cache": False} if layout == "bestfit" else {}
    batches = PackedBatches(corpus.tokens_dir, layout=layout, length=LENGTH, global_batch=GLOBAL_BATCH, seed=3,
                            layout_options=options)
    return [hashlib.sha256(np.ascontiguousarray(batches.global_rows(step)[:, :-1], dtype="<i8").tobytes()).hexdigest()
            for step in range(STEPS)]


def three_ways(corpus: tokpack.TokenizedCorpus, folder: Path, layout: str, *extra: str,
               one_rank_data: Path | None = None) -> dict[str, list[tuple[int, str, float]]]:
    """Run the example straight through on one rank and on two (checkpointing at CHECKPOINT_STEP),
    then resume that two-rank checkpoint on one rank, accumulating gradients over two
    micro-batches and evaluating at the end; return each run's log (the resumed run's output
    goes to ``resumed.out``). The one-rank run reads ``one_rank_data`` (skipped if ``None``)."""
    cache = folder / "cache"
    common = ["--data", str(corpus.tokens_dir), "--layout", layout, "--length", str(LENGTH),
              "--global-batch", str(GLOBAL_BATCH), "--seed", "3", "--steps", str(STEPS), *extra]
    two = run([*common, "--log-batches", str(folder / "two.log"), "--save", str(folder / "step{step}.pt"),
               "--save-every", str(CHECKPOINT_STEP)], cache=cache, ranks=2)
    assert two.returncode == 0, two.stderr[-3000:]
    resumed_log = folder / "resumed.log"
    resumed_log.write_text("".join(line + "\n" for line in (folder / "two.log").read_text().splitlines()[:CHECKPOINT_STEP]))
    # No --vocab: the pack carries its vocabulary, which the resume checks against the checkpoint.
    resumed = run([*common, "--log-batches", str(resumed_log), "--resume", str(folder / f"step{CHECKPOINT_STEP}.pt"),
                   "--micro-batches", "2", "--eval-every", str(STEPS)],
                  cache=cache)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (folder / "resumed.out").write_text(resumed.stdout)
    logs = {"two ranks": log_lines(folder / "two.log"), "two ranks, resumed on one": log_lines(resumed_log)}
    if one_rank_data is not None:
        one = run([*common, "--data", str(one_rank_data), "--log-batches", str(folder / "one.log")], cache=cache)
        assert one.returncode == 0, one.stderr[-3000:]
        logs["one rank"] = log_lines(folder / "one.log")
    return logs


@pytest.fixture(scope="module")
def stream_runs(corpus: tokpack.TokenizedCorpus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three runs over ``stream``; the one-rank run reads the corpus as a sharded dataset,
    the same stream of ids in two shards (so ``--data`` takes either)."""
    folder = tmp_path_factory.mktemp("stream")
    sharded = prepare_sharded(tokpack.sample_corpus(), folder / "dataset", vocab=corpus.vocabulary_path, shards=2,
                              processes=1, document_bytes=4096)
    assert sharded.meta.tokens_sha256 == corpus.meta.tokens_sha256
    (folder / "logs.json").write_text(json.dumps(three_ways(corpus, folder, "stream", one_rank_data=sharded.path)))
    return folder


def test_one_rank_two_ranks_and_a_resume_on_one_rank_see_the_same_batches(
    corpus: tokpack.TokenizedCorpus, stream_runs: Path
) -> None:
    logs = json.loads((stream_runs / "logs.json").read_text())
    expected = expected_hashes(corpus, "stream")
    assert len(set(expected)) == STEPS  # every step a different batch
    for name, lines in logs.items():
        assert [step for step, _, _ in lines] == list(range(STEPS)), name
        assert [digest for _, digest, _ in lines] == expected, name
    # The same computation on the same batches: ranks change only the order of summation.
    reference = [loss for *_, loss in logs["one rank"]]
    for name, lines in logs.items():
        np.testing.assert_allclose([loss for *_, loss in lines], reference, atol=1e-3, err_msg=name)


def test_the_loss_falls(corpus: tokpack.TokenizedCorpus, stream_runs: Path) -> None:
    losses = [loss for *_, loss in json.loads((stream_runs / "logs.json").read_text())["one rank"]]
    assert abs(losses[0] - np.log(corpus.n_vocab)) < 1.0, losses  # starts near chance, ln 513
    assert np.mean(losses[-3:]) < losses[0] - 0.3, losses
    # ... and on the validation range, which training never reads.
    (validation,) = re.findall(rf"step +{STEPS}  validation loss ([0-9.]+)", (stream_runs / "resumed.out").read_text())
    assert float(validation) < np.log(corpus.n_vocab) - 0.3, validation


def test_bestfit_with_document_masks_resumes_across_world_sizes(corpus: tokpack.TokenizedCorpus, tmp_path: Path) -> None:
    logs = three_ways(corpus, tmp_path, "bestfit", "--document-mask")
    expected = expected_hashes(corpus, "bestfit")
    for name, lines in logs.items():
        assert [(step, digest) for step, digest, _ in lines] == list(enumerate(expected)), name
    np.testing.assert_allclose([loss for *_, loss in logs["two ranks, resumed on one"]],
                               [loss for *_, loss in logs["two ranks"]], atol=1e-3)


def test_a_two_rank_checkpoint_resumes_at_a_doubled_global_batch_on_one_rank(
        corpus: tokpack.TokenizedCorpus, stream_runs: Path, tmp_path: Path) -> None:
    """The two-rank run's checkpoint of step 5 (global batch 8) resumed on one rank at 16: the
    loader's history keeps steps 0-4 at 8 and serves 5-8 at 16, as a fresh loader given that state,
    or the schedule up front, says."""
    import torch

    log = tmp_path / "run.log"
    log.write_text("".join(line + "\n" for line in (stream_runs / "two.log").read_text().splitlines()[:CHECKPOINT_STEP]))
    resumed = run(["--data", str(corpus.tokens_dir), "--layout", "stream", "--length", str(LENGTH), "--seed", "3",
                   "--global-batch", str(2 * GLOBAL_BATCH), "--steps", "9", "--log-batches", str(log),
                   "--resume", str(stream_runs / f"step{CHECKPOINT_STEP}.pt")], cache=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"step      {CHECKPOINT_STEP}  global batch 8 -> 16" in resumed.stdout, resumed.stdout
    rows = [line.split() for line in log.read_text().splitlines()]  # STEP SHA256 LOSS ROWS
    assert [(int(step), int(count)) for step, _, _, count in rows] == [(k, 8) for k in range(5)] + [(k, 16) for k in range(5, 9)]
    digests = [digest for _, digest, _, _ in rows]

    def digest(batch: np.ndarray) -> str:
        return hashlib.sha256(np.ascontiguousarray(batch[:, :-1], dtype="<i8").tobytes()).hexdigest()

    fresh = PackedBatches(corpus.tokens_dir, layout="stream", length=LENGTH, global_batch=16, seed=3)
    fresh.load_state_dict(torch.load(stream_runs / f"step{CHECKPOINT_STEP}.pt", weights_only=False)["loader"])
    assert [digest(fresh.global_rows(k)) for k in range(5, 9)] == digests[5:]
    planned = PackedBatches(corpus.tokens_dir, layout="stream", length=LENGTH, global_batch=[(0, 8), (5, 16)], seed=3)
    assert [digest(planned.global_rows(k)) for k in range(9)] == digests


@pytest.mark.parametrize("other_data", ["another vocabulary", "other ids, same vocabulary"])
def test_a_checkpoint_is_refused_on_other_data(corpus: tokpack.TokenizedCorpus, stream_runs: Path, tmp_path: Path,
                                               other_data: str) -> None:
    if other_data == "another vocabulary":
        other = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path / "cache", vocab_size=400, document_bytes=4096)
        expected = "vocabulary"
    else:  # the same text cut into other documents: other starts, other checksums
        other = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path / "cache", vocab=corpus.vocabulary_path,
                                document_bytes=2048)
        assert other.identity == corpus.identity
        expected = "other data"
    refused = run(["--data", str(other.tokens_dir), "--steps", str(STEPS), "--length", str(LENGTH), "--global-batch",
                   str(GLOBAL_BATCH), "--seed", "3", "--resume", str(stream_runs / f"step{CHECKPOINT_STEP}.pt")],
                  cache=tmp_path / "cache")
    assert refused.returncode == 2, refused.stderr[-3000:]
    message = refused.stderr.strip()
    assert "\n" not in message and expected in message, message


def test_eval_every_on_data_without_a_validation_range_is_refused_before_training(
        corpus: tokpack.TokenizedCorpus, tmp_path: Path) -> None:
    text = tmp_path / "train-only.txt"
    text.write_text(tokpack.sample_corpus().read_text(encoding="utf-8")[:40_000], encoding="utf-8")
    train_only = tokpack.prepare(text, vocab=corpus.vocabulary_path, cache_dir=tmp_path / "cache", document_bytes=4096)
    refused = run(["--data", str(train_only.tokens_dir), "--steps", "4", "--length", str(LENGTH), "--global-batch",
                   str(GLOBAL_BATCH), "--eval-every", "2", "--print-every", "1"], cache=tmp_path / "cache")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "no 'validation' range" in refused.stderr and "\n" not in refused.stderr.strip(), refused.stderr
    assert "step" not in refused.stdout  # refused at the start, not after training up to the first evaluation


def test_help_names_every_flag(tmp_path: Path) -> None:
    result = run_example(EXAMPLE, ["--help"], env=environment(tmp_path))
    assert result.returncode == 0, result.stderr
    for flag in ("--data", "--layout", "--length", "--global-batch", "--steps", "--seed", "--save", "--resume",
                 "--log-batches"):
        assert flag in result.stdout


def test_evaluation_under_document_mask_sees_the_document_boundaries(corpus: tokpack.TokenizedCorpus) -> None:
    """``--document-mask`` evaluates as it trains: the validation loss is the model's loss on
    EvalBatches' rows with their position_ids and document_ids (block-causal), not plain causal."""
    import argparse
    import importlib.util

    import torch
    import torch.nn.functional as F

    from tokpack.serve import EvalBatches

    spec = importlib.util.spec_from_file_location("train_gpt_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    os.environ.pop("WORLD_SIZE", None)
    ranks = example.Ranks()  # rank 0 of 1, no process group
    torch.manual_seed(0)
    model = example.GPT(corpus.n_vocab, LENGTH, layers=1, width=32, heads=2)

    def loss(**boundaries: bool) -> float:
        total = count = 0.0
        with torch.no_grad():
            for batch in EvalBatches(corpus.tokens_dir, length=LENGTH, batch_size=GLOBAL_BATCH, **boundaries):
                tensors = {key: torch.from_numpy(value) for key, value in batch.items() if isinstance(value, np.ndarray)}
                logits = model(tensors["input_ids"], tensors.get("position_ids"), tensors.get("document_ids"))
                labels = tensors["labels"].view(-1)
                total += F.cross_entropy(logits.view(-1, logits.shape[-1]), labels, ignore_index=batch_ignore,
                                         reduction="sum").item()
                count += float((labels != batch_ignore).sum())
        return total / count

    batch_ignore = EvalBatches(corpus.tokens_dir, length=LENGTH, batch_size=GLOBAL_BATCH).ignore_index
    masked, plain = loss(position_ids=True, document_ids=True), loss()
    assert abs(masked - plain) > 1e-4  # the validation range has document starts inside rows: the mask matters
    for document_mask, expected in ((True, masked), (False, plain)):
        args = argparse.Namespace(data=corpus.tokens_dir, length=LENGTH, global_batch=GLOBAL_BATCH,
                                  document_mask=document_mask)
        assert example.evaluate(model, args, ranks) == pytest.approx(expected, rel=1e-6)
