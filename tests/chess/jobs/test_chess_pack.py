"""Packing a month: layout, meta.json, pinned bytes, worker-count independence, errors that name the row."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tokpack
from tokpack.chess.jobs.pack import pack_games
from tokpack.chess.pgn.games import games_table, read_games_strictly
from tokpack.chess.schemes import make_encoder
from tokpack.chess.schemes.uci import BOS_ID, EOS_ID
from tokpack.chess.schemes.uci_bpe import train_bpe
from tokpack.store import Pack

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PINNED = {  # sha256 of tokens.npy and starts.npy
    "uci": ("c315930d818d140224e1c37eb37f8f1c1baa140a0aca50d885f9a101ebfdfd31",
            "a56db130d8d3ee0ccfd4269dadd5c78edd1c16d92346c8348e9eab84c2f28339"),
    "bpe": ("517c0919ef3f04058099f1cbd787d71be897cac35d7b47a1a82f5240d4ef276b",
            "bd154fe1655787b82726cb0ff9726f4c5f8912ba8b0543a456f25869ed2b8195"),
}


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 20 fixture games as a converted month."""
    path = tmp_path_factory.mktemp("games") / "year=2016" / "month=01" / "games.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(games_table(read_games_strictly(FIXTURES / "chess_games.pgn")), path)
    return path


def _digests(pack: Path) -> tuple[str, str]:
    return tuple(hashlib.sha256((pack / name).read_bytes()).hexdigest() for name in ("tokens.npy", "starts.npy"))  # type: ignore[return-value]


def test_pack_layout_and_meta(tmp_path: Path, month: Path) -> None:
    encoder = make_encoder("uci")
    meta = pack_games(month, encoder, tmp_path / "train", batch_games=7)
    pack = Pack(tmp_path / "train", verify=True)
    tokens = np.load(tmp_path / "train" / "tokens.npy")
    assert tokens.dtype == np.uint16 and meta.dtype == "uint16"
    assert meta.n_tokens == len(tokens) == pack.n_tokens and meta.n_docs == 20
    plies = pq.read_table(month).column("n_plies").to_numpy()
    lengths = np.diff(np.append(pack.starts, len(tokens)))
    assert lengths.tolist() == (plies + 5).tolist()
    assert (tokens[pack.starts] == BOS_ID).all() and tokens[-1] == EOS_ID
    assert (tokens[pack.starts[1:] - 1] == EOS_ID).all()
    assert meta.counts == {"n_games": 20, "unknown_moves": 0}
    assert meta.vocabulary == encoder.identity and meta.cut.rule == "game"
    assert meta.source.name == "year=2016/month=01/games.parquet"
    assert meta.source.sha256 == hashlib.sha256(month.read_bytes()).hexdigest()
    assert meta.ranges["train"].documents == (0, 20) and meta.ranges["train"].tokens == (0, meta.n_tokens)
    assert tokpack.require_vocabulary(pack.meta.model_dump(by_alias=True), encoder) is encoder
    with pytest.raises(ValueError, match="not the vocabulary"):
        tokpack.require_vocabulary(pack.meta.model_dump(by_alias=True), make_encoder("san"))
    validation = pack_games(month, encoder, tmp_path / "val", split="validation")
    assert list(validation.ranges) == ["validation"]


def test_packed_bytes_are_pinned_for_uci_and_a_bpe_trained_here(tmp_path: Path, month: Path) -> None:
    """The packed bytes are a contract: batch size, streaming and process count must not move them."""
    games = [g.uci for g in read_games_strictly(FIXTURES / "chess_games.pgn")]
    encoders = {"uci": make_encoder("uci"), "bpe": make_encoder("bpe", train_bpe(games, vocab_size=400))}
    for scheme, encoder in encoders.items():
        pack_games(month, encoder, tmp_path / scheme)
        assert _digests(tmp_path / scheme) == PINNED[scheme], scheme
        pack_games(month, encoder, tmp_path / f"{scheme}-small-batches", batch_games=3)
        assert _digests(tmp_path / f"{scheme}-small-batches") == PINNED[scheme]


def test_two_processes_write_the_same_bytes_as_one(tmp_path: Path, month: Path) -> None:
    encoder = make_encoder("san")
    one = pack_games(month, encoder, tmp_path / "one", batch_games=6)
    two = pack_games(month, encoder, tmp_path / "two", batch_games=6, workers=2)
    assert one == two
    assert _digests(tmp_path / "one") == _digests(tmp_path / "two")


def test_a_bad_game_names_the_file_and_row_and_leaves_no_pack(tmp_path: Path, month: Path) -> None:
    table = pq.read_table(month)
    moves = table.column("uci").to_pylist()
    moves[13] = moves[13] + " e1e1"
    bad = tmp_path / "bad.parquet"
    pq.write_table(table.set_column(table.column_names.index("uci"), "uci", pa.array(moves)), bad)
    with pytest.raises(ValueError, match=r"bad.parquet: row 13: ply \d+ \(e1e1\)"):
        pack_games(bad, make_encoder("san"), tmp_path / "san", batch_games=5)
    with pytest.raises(ValueError, match=r"bad.parquet: row 13: ply \d+ \(e1e1\)"):
        pack_games(bad, make_encoder("san"), tmp_path / "san", batch_games=5, workers=2)
    assert not (tmp_path / "san").exists() and not list(tmp_path.glob(".san*"))
    assert pack_games(bad, make_encoder("uci"), tmp_path / "uci").counts["unknown_moves"] == 1
    with pytest.raises(ValueError, match="already exists"):
        pack_games(month, make_encoder("uci"), tmp_path / "uci")
    pq.write_table(table.drop(["result"]), tmp_path / "no-result.parquet")
    with pytest.raises(ValueError, match="missing column"):
        pack_games(tmp_path / "no-result.parquet", make_encoder("uci"), tmp_path / "x")
    shutil.rmtree(tmp_path / "uci")


def test_packed_windows_waste_far_less_than_one_game_per_row(tmp_path: Path, month: Path) -> None:
    """Document-aligned windows run on into the next games; one game per row pads to the block."""
    from tokpack.serve import Windows

    pack_games(month, make_encoder("uci"), tmp_path / "uci")
    pack = Pack(tmp_path / "uci")
    assert pack.meta.pad_id == 0 and not (pack.tokens == 0).any()  # <pad> is never a real token
    block = 200
    windows = Windows(tmp_path / "uci", block=block)
    x, y = windows.window_batch(np.arange(len(windows)))
    assert len(windows) == 20 and (x[:, 0] == BOS_ID).all() and (y[:, :-1] == x[:, 1:]).all()
    # Padding in packed windows: the last target of each row, and what runs past the stream's end.
    past_end = np.maximum(pack.starts + block + 1 - pack.n_tokens, 0).clip(max=block)
    assert int((y == 0).sum()) == int(np.maximum(past_end, 1).sum())
    lengths = np.diff(np.append(pack.starts, pack.n_tokens))
    one_per_row = float(np.mean(np.maximum(block - (np.minimum(lengths, block + 1) - 1), 1)) / block)
    packed = float((y == 0).mean())
    assert packed < 0.25 and one_per_row > 0.5 and packed < one_per_row / 2
