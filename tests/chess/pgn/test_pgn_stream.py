"""PGN inputs as streams: a compressed file is read as the games it holds, however its frames begin."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import zstandard
from typer.testing import CliRunner

from tokpack.chess.pgn.games import read_games
from tokpack.cli import app

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "chess_games.pgn"
runner = CliRunner()


def _skippable(payload: bytes, kind: int = 0) -> bytes:
    """A zstd skippable frame (magic 0x184D2A50-5F, then the payload's length): decoders pass over it."""
    return (0x184D2A50 + kind).to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload


@pytest.mark.parametrize("kind", [0, 0xF])
def test_a_zstd_file_starting_with_a_skippable_frame_is_read_as_zstd(tmp_path: Path, kind: int) -> None:
    """zstd files may open with a skippable frame (pzstd and seekable-format writers put metadata
    there, and ``zstd -d`` reads them): the games inside are read, not the bytes as plain text."""
    pgn = FIXTURE.read_bytes()
    path = tmp_path / "games.pgn.zst"
    path.write_bytes(_skippable(b"metadata", kind) + zstandard.ZstdCompressor(write_checksum=True).compress(pgn))
    plain = tmp_path / "games.pgn"
    plain.write_bytes(pgn)
    assert [entry for _, entry in read_games(path)] == [entry for _, entry in read_games(plain)]
    out = tmp_path / "out"
    result = runner.invoke(app, ["chess", "convert", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "convert-report.json").read_text(encoding="utf-8"))
    rows = sum(pq.read_metadata(part).num_rows for part in out.rglob("games.parquet"))
    assert rows == report["games_written"] > 0
