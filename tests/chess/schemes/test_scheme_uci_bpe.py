"""The bpe scheme: shared special ids, exact round trips, saved files and split_moves' ambiguous cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, trainers

from tokpack.chess.pgn.games import read_games_strictly
from tokpack.chess.schemes.uci import BOS_ID, EOS_ID, RESULT_IDS, SPECIAL_TOKENS, UNK_ID
from tokpack.chess.schemes.uci_bpe import BpeEncoder, spaceless, split_moves, train_bpe

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="module")
def games() -> list[str]:
    return [g.uci for g in read_games_strictly(FIXTURES / "chess_games.pgn")]


@pytest.fixture(scope="module")
def trained(games: list[str]) -> BpeEncoder:
    return train_bpe(games, vocab_size=300)


def test_special_tokens_share_the_uci_ids(trained: BpeEncoder) -> None:
    assert trained.vocab_size() == 300
    for expected, token in enumerate(SPECIAL_TOKENS):
        assert trained.tokenizer.token_to_id(token) == expected
    payload = json.loads(trained.tokenizer.to_str())
    assert payload["model"]["type"] == "BPE" and payload["model"]["unk_token"] == "<unk>"
    assert payload["pre_tokenizer"] is None and payload["normalizer"] is None


def test_a_bpe_whose_pad_is_not_zero_is_refused(games: list[str]) -> None:
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.train_from_iterator((spaceless(g) for g in games), trainers.BpeTrainer(
        vocab_size=100, special_tokens=["<unk>", *[t for t in SPECIAL_TOKENS if t != "<unk>"]], show_progress=False))
    with pytest.raises(ValueError, match="'<pad>' has id 1 in the BPE but 0"):
        BpeEncoder(tokenizer)


def test_round_trip_is_exact_for_every_fixture_game(trained: BpeEncoder, games: list[str]) -> None:
    for game in read_games_strictly(FIXTURES / "chess_games.pgn"):
        ids = trained.encode_game(game.uci, game.white_elo, game.black_elo, game.result, max_len=1 << 30)
        assert ids[0] == BOS_ID and ids[-2] == RESULT_IDS[game.result] and ids[-1] == EOS_ID
        assert UNK_ID not in ids and all(i >= len(SPECIAL_TOKENS) for i in ids[1:-2])
        assert trained.decode(ids) == (game.uci, game.result, None, None)
    assert trained.encode_game(games[0], 1, 1, "*", max_len=5) == trained.encode_game(games[0], 9, 9, "*", 1 << 30)[:5]


def test_tokens_span_several_moves_and_training_is_deterministic(trained: BpeEncoder, games: list[str]) -> None:
    longest = trained.longest_tokens(10)
    assert len(longest) == 10 and longest[0][1] >= 8 and longest[0][1] == len(longest[0][0])
    again = train_bpe(games, vocab_size=300)
    assert again.tokenizer.to_str() == trained.tokenizer.to_str() and again.identity == trained.identity
    assert train_bpe(games, vocab_size=290).identity != trained.identity


def test_save_and_load(tmp_path: Path, trained: BpeEncoder, games: list[str]) -> None:
    path = tmp_path / "bpe" / "tokenizer.json"
    trained.save(path)
    loaded = BpeEncoder.load(path)
    assert loaded.identity == trained.identity
    assert loaded.encode_game(games[3], 0, 0, "1-0", 999) == trained.encode_game(games[3], 0, 0, "1-0", 999)
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json: not a chess BPE"):
        BpeEncoder.load(tmp_path / "broken.json")


def test_split_moves_restores_boundaries_in_the_ambiguous_cases() -> None:
    assert split_moves("e2e4e7e5") == ["e2e4", "e7e5"]
    # 4...Bxc1 is a bishop going from the 2nd rank to the 1st, then 5.b4: that 'b' is a file.
    bishop = "d2d3 e7e6 e1d2 f8b4 d2e3 b4d2 e3f3 d2c1 b2b4".split()
    assert split_moves("".join(bishop)) == bishop
    # A bishop that ends on the b-file, then a move from the b-file.
    to_b_file = "e2e3 e7e6 f1b5 b7b6 b5a4 b8c6".split()
    assert split_moves("".join(to_b_file)) == to_b_file
    # 5.gxh8=B, then 5...Nc6: the first 'b' is the promotion piece, the second a file.
    promotion = "h2h4 g7g5 h4g5 h7h6 g5g6 f7f6 g6g7 f6f5 g7h8b b8c6".split()
    assert split_moves("".join(promotion)) == promotion
    # After an illegal move the board is unknown: the rank rule decides.
    assert split_moves("e2e5e7e8qa1a2") == ["e2e5", "e7e8q", "a1a2"]
    assert split_moves("e2e5a7a8bb1b2") == ["e2e5", "a7a8b", "b1b2"]
    with pytest.raises(ValueError, match="at character 4"):
        split_moves("e2e4x")


def test_split_moves_on_random_games_full_of_promotions() -> None:
    import random

    import chess

    rng = random.Random(11)
    for _ in range(60):
        board, moves = chess.Board(), []
        while not board.is_game_over() and len(moves) < 200:
            legal = list(board.legal_moves)
            promotions = [m for m in legal if m.promotion in (chess.BISHOP, chess.KNIGHT)]
            pawns = [m for m in legal if board.piece_type_at(m.from_square) == chess.PAWN]
            move = rng.choice(promotions or (pawns if pawns and rng.random() < 0.6 else legal))
            moves.append(move.uci())
            board.push(move)
        assert split_moves("".join(moves)) == moves
