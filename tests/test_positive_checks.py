"""Counts that must be at least 1 are checked by the one shared check (``_checks.positive_int``):
the same message shape everywhere, naming the argument, and a bool or a fraction is not a count."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tokpack.bpe.fast import train_fast
from tokpack.chess.shards import plan_shards
from tokpack.cli import app
from tokpack.errors import InputError
from tokpack.serve.history import batch_plan, batch_ramp
from tokpack.store.exporting import ExportOptions, check_options
from tokpack.vocab import BpeTokenizer
from tokpack.vocab.hf_trainer import train_hf_bytelevel

BYTES_ONLY = BpeTokenizer(ranks={bytes([b]): b for b in range(256)})

CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("ramp", lambda: batch_ramp(0, 4, 24, 12), "batch_ramp: start must be a positive integer, got 0"),
    ("ramp-bool", lambda: batch_ramp(4, True, 24, 12), "batch_ramp: increment must be a positive integer, got True"),
    ("global-batch", lambda: batch_plan(0), "global_batch must be a positive integer, got 0"),
    ("global-batch-schedule", lambda: batch_plan([(0, 4), (5, 0)]),
     "global_batch from step 5 must be a positive integer, got 0"),
    ("rows-per-file", lambda: check_options(ExportOptions(rows_per_file=0)),
     "rows_per_file must be a positive number of documents per file, got 0; "
     "pass rows_per_file=1 or more (default 1048576)"),
    ("min-frequency", lambda: train_fast(["abab"], 1, min_frequency=0), "min_frequency must be at least 1, got 0"),
    ("min-frequency-fraction", lambda: train_fast(["abab"], 1, min_frequency=1.5),  # type: ignore[arg-type]
     "min_frequency must be at least 1, got 1.5"),
    ("hf-min-frequency-bool", lambda: train_hf_bytelevel(["abab"], vocab_size=300, min_frequency=True),
     "min_frequency must be at least 1, got True"),
    ("shard-bytes", lambda: plan_shards([], shard_bytes=0), "shard_bytes must be an integer in [1, 4611686018427387904], got 0"),
    ("shard-games", lambda: plan_shards([], shard_games=0), "shard_games must be an integer in [1, 4611686018427387904], got 0"),
    ("encode-arrays-threads", lambda: BYTES_ONLY.encode_arrays(["a", "b"], num_threads=-1),
     "num_threads must be a positive integer, got -1; omit it for one per core"),
    ("encode-arrays-threads-zero", lambda: BYTES_ONLY.encode_arrays(["a"], num_threads=0),
     "num_threads must be a positive integer, got 0; omit it for one per core"),
    ("encode-arrays-threads-fraction", lambda: BYTES_ONLY.encode_arrays(["a"], num_threads=1.5),  # type: ignore[arg-type]
     "num_threads must be a positive integer, got 1.5; omit it for one per core"),
    ("encode-batch-threads", lambda: BYTES_ONLY.encode_batch(["a", "b"], num_threads=-1),
     "num_threads must be a positive integer, got -1; omit it for one per core"),
]


@pytest.mark.parametrize(("call", "message"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_count_below_one_or_not_an_integer_is_refused_naming_it(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        call()


@pytest.mark.parametrize(("flag", "value"), [("--shards", "0"), ("--workers", "0")])
def test_prepare_refuses_a_shard_or_worker_count_below_one(tmp_path: Path, flag: str, value: str) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("ab ab\n")
    shards = ["--shards", "2"] if flag == "--workers" else []
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(tmp_path / "vocab.json"),
                                      "--out", str(tmp_path / "out"), *shards, flag, value])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error:") and f"{flag} must be at least 1, got 0" in lines[0], result.stderr
