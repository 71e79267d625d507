"""The char scheme is Adam Karvonen's character-level format (``;1.e4 e5 2.Nf3 ...``, his 32-symbol
alphabet and meta.pkl), and `tokpack chess blocks` writes his nanoGPT's data: blocks of 1,024
characters, each starting at a game, that read back into the packed games."""

from __future__ import annotations

import pickle
from pathlib import Path

import chess
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tokpack.chess.jobs.config import ChessPipelineConfig
from tokpack.chess.jobs.pipeline import tokenize
from tokpack.chess.pgn.convert import convert_pgn
from tokpack.chess.schemes.char import CharEncoder, block_starts, moves_of_text
from tokpack.cli import app

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
#: The ``stoi`` of Karvonen's ``meta.pkl`` (chess_llm_interpretability, nanoGPT's lichess_hf_dataset).
KARVONEN_STOI = {" ": 0, "#": 1, "+": 2, "-": 3, ".": 4, "0": 5, "1": 6, "2": 7, "3": 8, "4": 9, "5": 10, "6": 11,
                 "7": 12, "8": 13, "9": 14, ";": 15, "=": 16, "B": 17, "K": 18, "N": 19, "O": 20, "Q": 21, "R": 22,
                 "a": 23, "b": 24, "c": 25, "d": 26, "e": 27, "f": 28, "g": 29, "h": 30, "x": 31}


def karvonen_text(uci: str) -> str:
    """A game as Karvonen writes it, spelled by python-chess."""
    board, words = chess.Board(), []
    for ply, move in enumerate(uci.split()):
        san = board.san(chess.Move.from_uci(move))
        words.append(f"{ply // 2 + 1}.{san}" if ply % 2 == 0 else san)
        board.push_uci(move)
    return ";" + " ".join(words)


@pytest.fixture(scope="module")
def real_games(shared_data: Path) -> list[str]:
    return pq.read_table(shared_data / "chess" / "games.parquet", columns=["uci"]).column("uci").to_pylist()[:400]


def test_games_are_karvonens_characters(real_games: list[str]) -> None:
    encoder = CharEncoder()
    assert {token: i for i, token in enumerate(encoder.tokens[:32])} == KARVONEN_STOI and encoder.pad_id == 32
    encoded = encoder.encode_batch(pa.table({"uci": [*real_games, ""]}))
    texts = [encoder.text(encoded.game(i)) for i in range(len(real_games) + 1)]
    assert texts == [karvonen_text(g) for g in real_games] + [";"]
    assert any("#" in t for t in texts) and any("=" in t for t in texts) and any("O-O-O" in t for t in texts)
    assert [encoder.decode(encoded.game(i)).uci for i in range(len(real_games))] == real_games
    assert encoder.encode_game(real_games[0], None, None, "1-0", max_len=10**6) == encoded.game(0)


def test_block_starts_chain_from_game_to_game() -> None:
    rng = np.random.default_rng(0)
    starts = np.concatenate(([0], np.cumsum(rng.integers(1, 900, size=5000))))
    blocks = block_starts(starts, 1024).tolist()
    expected, at = [], 0
    while at < len(starts):  # the rule, one block at a time
        expected.append(at)
        at = int(np.searchsorted(starts, starts[at] + 1024, side="left"))
    assert blocks == expected


def test_blocks_are_karvonens_training_data_and_read_back(tmp_path: Path) -> None:
    games = tmp_path / "games"
    convert_pgn([FIXTURES / "chess_games.pgn"], games)
    cfg = ChessPipelineConfig.model_validate({"games_dir": games, "out_dir": tmp_path / "tokens", "train_months": "all",
                                              "val_fraction": 0.2})
    tokenize(cfg, "char", pack=True)
    result = CliRunner().invoke(app, ["chess", "blocks", str(tmp_path / "tokens" / "char"), "-o", str(tmp_path / "karvonen")])
    assert result.exit_code == 0, result.output
    meta = pickle.loads((tmp_path / "karvonen" / "meta.pkl").read_bytes())
    assert meta == {"vocab_size": 32, "stoi": KARVONEN_STOI, "itos": {i: c for c, i in KARVONEN_STOI.items()}}
    packed = [pq.read_table(p, columns=["uci"]).column("uci").to_pylist()
              for p in sorted(games.glob("year=*/month=*/games.parquet"))]
    source = [karvonen_text(g) for month in packed for g in month]
    for name in ("train", "val"):
        data = np.memmap(tmp_path / "karvonen" / f"{name}.bin", dtype=np.uint8, mode="r")  # how his train.py reads it
        assert len(data) % 1024 == 0 and len(data) >= 1024 and int(data.max()) < 32
        blocks = np.asarray(data).reshape(-1, 1024)
        assert (blocks[:, 0] == KARVONEN_STOI[";"]).all()
        x, y = data[0:1023], data[1:1024]  # a row of his get_batch (block_size 1023)
        assert np.array_equal(x[1:], y[:-1])
        text = "".join(meta["itos"][int(i)] for i in data)
        read = [";" + game for block in (text[i:i + 1024] for i in range(0, len(text), 1024)) for game in block.split(";")[1:]]
        # Every game of the split in order (validation: the latest months), the last of each block
        # cut where the block ends, as the next block starts at the next game.
        start = 0 if name == "train" else source.index(read[0])
        for offset, game in enumerate(read):
            original = source[start + offset]
            assert original.startswith(game), (offset, game[:40], original[:40])
            assert moves_of_text(game) == moves_of_text(original)[:len(moves_of_text(game))]
        assert sum(game == source[start + i] for i, game in enumerate(read)) > len(read) // 2


def test_blocks_refuse_another_schemes_pack(tmp_path: Path) -> None:
    games = tmp_path / "games"
    convert_pgn([FIXTURES / "chess_games.pgn"], games)
    cfg = ChessPipelineConfig.model_validate({"games_dir": games, "out_dir": tmp_path / "tokens", "train_months": "all",
                                              "val_fraction": 0.2})
    tokenize(cfg, "uci", pack=True)
    result = CliRunner().invoke(app, ["chess", "blocks", str(tmp_path / "tokens" / "uci"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "holds the uci scheme's ids, not the char scheme's" in result.output
    assert not (tmp_path / "out").exists()
