"""examples/train_gpt.py's evaluation says what it will do and, while it runs long, how far it got
and how long is left."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")

import tokpack

from conftest import REPO


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_gpt_example", REPO / "examples" / "train_gpt.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_long_evaluation_reports_its_progress(example: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path / "cache", vocab_size=300, document_bytes=4096)
    args = example.parse_arguments(["--data", str(corpus.tokens_dir), "--length", "16", "--global-batch", "64",
                                    "--layers", "1", "--width", "16", "--heads", "2", "--steps", "1", "--eval-every", "1"])
    example.resolve_settings(args, None, 1)  # a fresh run's settings, as train() resolves them
    model = example.GPT(corpus.n_vocab, args.length, layers=1, width=16, heads=2)
    monkeypatch.setattr(example, "EVAL_PROGRESS_SECONDS", 0.0)  # every step counts as long here
    loss = example.evaluate(model, args, example.Ranks())
    lines = capsys.readouterr().out.splitlines()
    rows = corpus.pack().meta.ranges["validation"].tokens
    first = re.fullmatch(r"validation: ([0-9,]+) rows of 16 ids in ([0-9,]+) steps", lines[0])
    assert first is not None, lines[0]
    steps = int(first.group(2).replace(",", ""))
    assert steps == -(-int(first.group(1).replace(",", "")) // 64) > 2 and rows[1] > rows[0]
    progress = lines[1:]
    assert len(progress) == steps - 1  # before every step but the first
    for done, line in enumerate(progress, start=1):
        assert re.fullmatch(rf"validation: {done:,} of {steps:,} steps \({done / steps:.0%}\), about [0-9,]+ s left", line), line
    assert loss > 0
