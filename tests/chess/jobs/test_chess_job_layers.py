"""A chess tokenize job's parameters go down through the engines and come back up into chess only
where a kind must answer: the engines' lifecycle calls chess code at a few named places, counted
here call by call while a real job packs a month."""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

from tokpack.chess.jobs.config import ChessPipelineConfig
from tokpack.chess.jobs.pipeline import available_months, tokenize
from tokpack.chess.pgn.convert import convert_pgn

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

#: The chess functions the engines' lifecycle enters: the encoder described for ``encoder.json``
#: and rebuilt from it, one shard written with it, and the job's records of its input.
MOST_CLIMBS = 4


def _climbs_during(run: Any) -> dict[str, set[str]]:
    """The chess functions engines functions call while ``run()`` runs, and who calls each."""
    climbs: dict[str, set[str]] = {}

    def profile(frame: FrameType, event: str, arg: object) -> None:
        caller = frame.f_back
        if event != "call" or caller is None:
            return
        callee, origin = frame.f_globals.get("__name__", ""), caller.f_globals.get("__name__", "")
        if origin.startswith("tokpack.engines") and callee.startswith("tokpack.chess"):
            climbs.setdefault(f"{callee}.{frame.f_code.co_name}", set()).add(f"{origin}.{caller.f_code.co_name}")

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return climbs


def test_a_chess_job_returns_to_chess_at_most_four_times(tmp_path: Path) -> None:
    games = tmp_path / "games"
    convert_pgn([FIXTURES / "chess_games.pgn"], games)
    months = available_months(games)
    cfg = ChessPipelineConfig.model_validate({"games_dir": games, "out_dir": tmp_path / "tokens", "workers": 1,
                                              "train_months": months[:-1], "val_months": months[-1:], "shard_games": 7})
    progress: list[tuple[str, int, int]] = []
    climbs = _climbs_during(lambda: tokenize(cfg, "san", pack=True, progress=lambda *event: progress.append(event)))
    assert progress and (tmp_path / "tokens" / "san" / "train" / "dataset.json").is_file()
    assert 0 < len(climbs) <= MOST_CLIMBS, "\n".join(f"{callee} <- {sorted(callers)}" for callee, callers in climbs.items())
