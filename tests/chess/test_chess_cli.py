"""``tokpack chess convert`` and ``tokpack chess tokenize`` end to end on a temporary config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from typer.testing import CliRunner

from tokpack.chess.pgn.games import games_table, read_games_strictly
from tokpack.cli import app
from tokpack.store.dataset import ShardedDataset

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["chess", *args])
    return result.exit_code, result.output


def test_convert_then_tokenize_every_scheme(tmp_path: Path) -> None:
    code, output = _run("convert", str(FIXTURES / "chess_games.pgn"), "--out", str(tmp_path / "games"))
    assert code == 0, output
    assert "games written" in output and "20" in output
    report = json.loads((tmp_path / "games" / "convert-report.json").read_text(encoding="utf-8"))
    train, val = sorted(report["months"], key=lambda m: (-report["months"][m], m))[:2]
    all_games = tmp_path / "all.parquet"
    pq.write_table(games_table(read_games_strictly(FIXTURES / "chess_games.pgn")), all_games)
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'games_dir = "games"\nout_dir = "tokens"\ntrain_month = "{train}"\nval_month = "{val}"\n'
        f'bpe_vocab_size = 300\nbpe_train_games = 20\nstats_games = 20\nmax_len = 200\n'
        f'fixture_pgn = "{(FIXTURES / "chess_games.pgn").as_posix()}"\n', encoding="utf-8")

    code, output = _run("tokenize", "--scheme", "bpe", "--stats", "--export-fixture", "--pack",
                        "--games", str(all_games), "--config", str(config))
    assert code == 0, output
    assert "vocab_size: 300" in output and "Longest BPE tokens" in output
    tokens = tmp_path / "tokens"
    stats = json.loads((tokens / "stats.json").read_text(encoding="utf-8"))
    assert {s: v["vocabulary"]["n_vocab"] for s, v in stats["schemes"].items()} == {"uci": 2030, "san": 37, "bpe": 300}
    assert stats["n_games"] == 20
    parity = json.loads((tokens / "parity.json").read_text(encoding="utf-8"))
    assert len(parity["games"]) == 20 and set(parity["games"][0]["ids"]) == {"uci", "san", "bpe"}
    assert (tokens / "bpe" / "tokenizer.json").is_file()

    for scheme in ("bpe", "uci", "san"):
        if scheme != "bpe":
            code, output = _run("tokenize", "--scheme", scheme, "--pack", "--config", str(config))
            assert code == 0, output
        for folder, split, month in (("train", "train", train), ("val", "validation", val)):
            pack = ShardedDataset(tokens / scheme / folder, verify=True)  # one shard: one month
            assert len(pack.shards) == 1 and pack.meta.counts["n_games"] == report["months"][month] == pack.n_docs
            assert sorted(pack.meta.ranges) == sorted([split, month]) and pack.meta.vocabulary.scheme == scheme
            assert pack.take(np.array([0, pack.n_tokens - 1])).tolist() == [1, 2]
    uci = ShardedDataset(tokens / "uci" / "train")
    plies = pq.read_table(tmp_path / "games" / f"year={train[:4]}" / f"month={train[5:]}" / "games.parquet").column("n_plies")
    assert np.diff(np.append(uci.starts, uci.n_tokens)).tolist() == [p + 5 for p in plies.to_pylist()]

    code, output = _run("tokenize", "--scheme", "uci", "--pack", "--config", str(config))
    assert code == 2 and "already exists" in output and "Traceback" not in output
    # Packing bpe again is refused before the BPE is retrained over the one its packs used.
    trained = (tokens / "bpe" / "tokenizer.json").stat().st_mtime_ns
    code, output = _run("tokenize", "--scheme", "bpe", "--pack", "--config", str(config), "--games", str(all_games))
    assert code == 2 and "bpe/train: already exists" in output
    assert (tokens / "bpe" / "tokenizer.json").stat().st_mtime_ns == trained


def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    # A bad scheme is refused before anything is loaded (the config named does not even exist).
    code, output = _run("tokenize", "--scheme", "fen", "--config", str(tmp_path / "missing.toml"))
    assert code == 2 and "--scheme must be one of uci, san, bpe" in output and "missing.toml" not in output
    code, output = _run("tokenize", "--scheme", "uci", "--config", str(tmp_path / "missing.toml"))
    assert code == 2 and "missing.toml: no such config file" in output
    config = tmp_path / "broken.toml"
    config.write_text('games_dir = "g"\nout_dir = "o"\ntrain_month = "2016-1"\nval_month = "2016-02"\n', encoding="utf-8")
    code, output = _run("tokenize", "--scheme", "uci", "--pack", "--config", str(config))
    assert code == 2 and "broken.toml: train_month" in output
    config.write_text('games_dir = "g"\nout_dir = "o"\ntrain_month = "2016-01"\nval_month = "2016-02"\n', encoding="utf-8")
    code, output = _run("tokenize", "--scheme", "uci", "--pack", "--config", str(config))
    assert code == 2 and "month=01/games.parquet" in output
    code, output = _run("convert", str(tmp_path / "nope.pgn"), "--out", str(tmp_path / "out"))
    assert code == 2 and "nope.pgn: not a file" in output
    for out in (output,):
        assert "Traceback" not in out and len(out.strip().splitlines()) == 1


def test_the_readme_python_example_runs(tmp_path: Path) -> None:
    import re
    import shutil
    import subprocess
    import sys

    section = (Path(__file__).resolve().parents[2] / "docs" / "chess.md").read_text(encoding="utf-8")
    code = "\n".join(re.findall(r"```python\n(.*?)```", section, flags=re.S))
    shutil.copy(FIXTURES / "chess_games.pgn", tmp_path / "games.pgn")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    # The month, the batch's shape, <bos> opening the first window, and <pad> as ignore_index.
    assert re.fullmatch(r"\d{4}-\d{2} \(3, 200\) 1 0\n", done.stdout), done.stdout
