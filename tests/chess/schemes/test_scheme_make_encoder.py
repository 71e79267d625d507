"""``make_encoder("bpe", bpe=...)`` takes the trained BPE or the path of its ``tokenizer.json``, and
refuses anything else at once, not at the first game it would encode."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokpack.chess.schemes import make_encoder
from tokpack.chess.schemes.uci_bpe import BpeEncoder
from tokpack.errors import InputError

from conftest import REPO

CHESS_BPE = REPO / "tests" / "fixtures" / "chess_bpe.json"
GAME = "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6"


def test_a_path_is_read_as_the_bpe_it_holds() -> None:
    loaded = make_encoder("bpe", BpeEncoder.load(CHESS_BPE))
    for given in (str(CHESS_BPE), CHESS_BPE):
        by_path = make_encoder("bpe", bpe=given)
        assert by_path.identity == loaded.identity
        ids = by_path.encode_game(GAME, 1800, 1750, "1-0", 64)
        assert ids == loaded.encode_game(GAME, 1800, 1750, "1-0", 64)
        assert by_path.decode(ids) == loaded.decode(ids)


def test_anything_else_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"bpe must be a trained BpeEncoder or the path of its tokenizer.json, got dict"):
        make_encoder("bpe", bpe={"model": "BPE"})  # type: ignore[arg-type]
    missing = tmp_path / "tokenizer.json"
    with pytest.raises(InputError, match=f"^{missing}: not a chess BPE"):
        make_encoder("bpe", bpe=str(missing))


@pytest.mark.parametrize("scheme", ["char", "position"])
def test_one_games_ids_are_the_batchs_cut_and_an_illegal_move_is_named(scheme: str) -> None:
    """``encode_game`` of the schemes whose ids come from the moves alone: the table's ids for that
    game, cut to ``max_len``; an illegal move is an InputError naming its ply."""
    import pyarrow as pa

    encoder = make_encoder(scheme)
    game = "e2e4 e7e5 g1f3 b8c6"
    whole = encoder.encode_batch(pa.table({"uci": [game]})).ids.tolist()
    assert encoder.encode_game(game, None, None, "*", max_len=10**9) == whole
    assert encoder.encode_game(game, None, None, "*", max_len=5) == whole[:5]
    with pytest.raises(InputError, match="ply 2"):
        encoder.encode_game("e2e4 e2e4", None, None, "*", max_len=10**9)
