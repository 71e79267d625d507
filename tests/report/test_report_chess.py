"""The report of the chess statistics (three schemes on the same real games), in a real browser."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tokpack.cli import app

from browser import browser_page, embedded_data, screenshot

N_GAMES = 1500
runner = CliRunner()


@pytest.fixture(scope="module")
def stats(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    work = tmp_path_factory.mktemp("chess")
    config = work / "pipeline.toml"
    config.write_text(
        'schema = "tokpack.chess.pipeline.v1"\ngames_dir = "games"\nout_dir = "out"\ntrain_month = "2016-01"\n'
        f'val_month = "2016-02"\nbpe_vocab_size = 512\nbpe_train_games = {N_GAMES}\nstats_games = {N_GAMES}\nmax_len = 200\n',
        encoding="utf-8")
    result = runner.invoke(app, ["chess", "tokenize", "--scheme", "bpe", "--stats", "--config", str(config),
                                 "--games", str(shared_data / "chess" / "games.parquet")])
    assert result.exit_code == 0, result.stderr
    return config.parent / "out" / "stats.json"


def test_chess_report_compares_the_three_schemes(stats: Path, shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "chess.html"
    result = runner.invoke(app, ["report", str(stats), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    plies = pq.read_table(shared_data / "chess" / "games.parquet", columns=["n_plies"]).column(0).to_numpy()[:N_GAMES]
    uci_lengths = plies + 5  # <bos>, two ratings, the moves, the result, <eos>
    with browser_page() as page:
        page.goto(out.as_uri())
        facts = embedded_data(page)["chess"]
        uci = facts["schemes"]["uci"]
        assert facts["n_games"] == N_GAMES
        assert uci["mean"] == pytest.approx(uci_lengths.mean(), abs=0.01)  # computed here, independently
        assert uci["within_max_len"] == pytest.approx(100 * np.mean(uci_lengths <= 200), abs=0.01)
        names = page.get_by_test_id("scheme-name").all_inner_texts()
        assert names == list(facts["schemes"]) and set(names) == {"uci", "san", "bpe"}
        assert page.get_by_test_id("scheme-mean").all_inner_texts() == [f"{s['mean']:.2f}" for s in facts["schemes"].values()]
        assert page.get_by_test_id("scheme-within").all_inner_texts() == [
            f"{s['within_max_len']:.2f}%" for s in facts["schemes"].values()]
        assert page.get_by_test_id("scheme-vocab").all_inner_texts()[names.index("uci")] == "2,030"
        moves = [float(m) for m in page.get_by_test_id("bpe-moves").all_inner_texts()]
        tokens = page.get_by_test_id("bpe-token").all_inner_texts()
        assert moves and all(m == pytest.approx(len(t) / 4) for m, t in zip(moves, tokens))
        assert page.get_by_test_id("scheme-chart").locator("svg").count() == 1
        screenshot(page, "report-chess")
