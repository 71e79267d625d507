"""The committed parity fixture: reproducible byte for byte, complete, and what it claims to cover."""

from __future__ import annotations

from pathlib import Path

import chess
import pytest

from tokpack.chess.jobs.fixture import FEATURES, build_parity, features, parity_text, read_parity, write_parity
from tokpack.chess.pgn.games import read_games_strictly
from tokpack.chess.schemes import make_encoder
from tokpack.chess.schemes.uci_bpe import BpeEncoder, train_bpe

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PGN = FIXTURES / "chess_games.pgn"
PARITY = FIXTURES / "chess_parity.json"
BPE = FIXTURES / "chess_bpe.json"
#: How the committed BPE was trained: the fixture's own games, 600 ids asked for.
BPE_VOCAB_SIZE = 600


def test_the_committed_bpe_is_what_training_on_the_fixture_gives() -> None:
    trained = train_bpe([g.uci for g in read_games_strictly(PGN)], BPE_VOCAB_SIZE)
    # Same tokens, ids and merges (the identity hashes them), whatever JSON layout the
    # installed tokenizers version writes.
    assert trained.identity == BpeEncoder.load(BPE).identity


def test_the_committed_parity_file_is_regenerated_byte_for_byte(tmp_path: Path) -> None:
    encoders = [make_encoder("uci"), make_encoder("san"), make_encoder("bpe", BpeEncoder.load(BPE))]
    fixture = build_parity(PGN, encoders)
    write_parity(fixture, tmp_path / "parity.json")
    assert (tmp_path / "parity.json").read_bytes() == PARITY.read_bytes()
    raw = PARITY.read_bytes()
    assert raw.isascii() and b"\r" not in raw and raw.endswith(b"}\n") and not raw.endswith(b"\n\n")
    assert all(not line.startswith(b" ") for line in raw.splitlines())  # indent=0
    assert parity_text(read_parity(PARITY)) == raw.decode("ascii")


def test_every_game_carries_its_moves_san_and_the_ids_of_every_scheme() -> None:
    fixture = read_parity(PARITY)
    assert len(fixture.games) == 20 and set(fixture.vocabularies) == {"uci", "san", "bpe"}
    encoders = {"uci": make_encoder("uci"), "san": make_encoder("san"), "bpe": make_encoder("bpe", BpeEncoder.load(BPE))}
    for scheme, encoder in encoders.items():
        assert fixture.vocabularies[scheme] == encoder.identity
    for game in fixture.games:
        board = chess.Board()
        assert game.san == board.variation_san([chess.Move.from_uci(m) for m in game.uci.split()]).replace(". ", ".")
        for scheme, encoder in encoders.items():
            decoded = encoder.decode(game.ids[scheme])
            assert (decoded.uci, decoded.result) == (game.uci, game.result), (game.id, scheme)
        assert len(game.ids["uci"]) == len(game.uci.split()) + 5


def test_the_games_cover_every_result_both_castlings_and_an_under_promotion() -> None:
    shown = set().union(*(features(g) for g in read_games_strictly(PGN)))
    assert shown == set(FEATURES)
    assert {"1-0", "0-1", "1/2-1/2", "white O-O", "white O-O-O", "black O-O", "black O-O-O", "under-promotion"} <= shown


def test_a_corrupt_fixture_is_refused(tmp_path: Path) -> None:
    text = PGN.read_text(encoding="utf-8")
    corrupt = tmp_path / "corrupt.pgn"
    corrupt.write_text(text.replace("Nf3", "Nf5", 1), encoding="utf-8")
    with pytest.raises(ValueError, match=r"corrupt.pgn@\d+: illegal_move"):
        build_parity(corrupt, [make_encoder("uci")])
