"""The uci scheme: a fixed vocabulary of every geometrically possible UCI move, no training.

Ids, section by section (2,030 in all)::

    0 ..    7   special tokens: <pad> <bos> <eos> <unk> 1-0 0-1 1/2-1/2 *
    8 ..   60   Elo bins, 50 points wide: "<elo:under650>" (every rating below 650),
                "<elo:650-699>", ..., "<elo:3150-3199>", "<elo:3200+>" (3200 and above)
   61           "<elo:missing>" (no rating, or a rating of 0 or less)
   62 .. 1853   the 1,792 queen and knight moves (from any square, along a rank, file or
                diagonal, or a knight's jump), by from-square then to-square (a1, b1, ..., h8)
 1854 .. 2029   the 176 promotions (a pawn move from the 7th rank to the 8th or from the 2nd
                to the 1st, straight or capturing), by from-square, to-square, then n, b, r, q

A game is ``<bos>, white Elo, black Elo, moves..., result, <eos>``: five framing tokens around
one id per ply. A move outside the table (malformed, or geometrically impossible like
``a1c4``) becomes ``<unk>`` and is counted in :attr:`EncodedGames.unknown_moves`.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from tokpack.chess.board.results import RESULTS
from tokpack.chess.schemes._uci_moves import N_PROMOTION_CODES, PROMOTION_TYPES, parse_moves
from tokpack.chess.schemes.game_encoder import (
    RESULT_IDS,
    DecodedGame,
    EloBin,
    EncodedGames,
    canonical_identity,
    framed,
    result_id,
    result_indices,
)
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    import pyarrow as pa

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>", "1-0", "0-1", "1/2-1/2", "*")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
if RESULT_IDS != {result: SPECIAL_TOKENS.index(result) for result in RESULTS}:  # shared with encoders
    raise ImportError("result ids differ from the special tokens")

ELO_LOWEST_EDGE = 650
ELO_BIN_WIDTH = 50
ELO_N_BINS = 53
ELO_FIRST_ID = len(SPECIAL_TOKENS)
ELO_MISSING_ID = ELO_FIRST_ID + ELO_N_BINS
MOVES_FIRST_ID = ELO_MISSING_ID + 1
N_QUEEN_AND_KNIGHT_MOVES = 1792
PROMOTIONS_FIRST_ID = MOVES_FIRST_ID + N_QUEEN_AND_KNIGHT_MOVES
N_PROMOTIONS = 176
VOCAB_SIZE = PROMOTIONS_FIRST_ID + N_PROMOTIONS
#: Framing tokens around the moves of one game: <bos>, two Elo bins, result, <eos>.
FRAMING = 5


def square_name(square: int) -> str:
    """``0`` -> ``"a1"``, ``63`` -> ``"h8"``."""
    return "abcdefgh"[square % 8] + str(square // 8 + 1)


def elo_bin_index(rating: int | None) -> int:
    """The bin of a rating, 0..52, or 53 for a missing one (``None`` or ``<= 0``).

    Ratings below 650 clamp to bin 0, ratings of 3200 and above to bin 52.

    >>> [elo_bin_index(r) for r in (100, 649, 650, 2612, 3199, 3200, 4000, None, 0)]
    [0, 0, 1, 40, 51, 52, 52, 53, 53]
    """
    if rating is None or rating <= 0:
        return ELO_N_BINS
    return min(max((rating - ELO_LOWEST_EDGE) // ELO_BIN_WIDTH + 1, 0), ELO_N_BINS - 1)


def elo_bin(index: int) -> EloBin:
    """The inclusive bounds of bin ``index`` (53: the missing rating).

    >>> elo_bin(0), elo_bin(40), elo_bin(52), elo_bin(53)
    (EloBin(low=None, high=649), EloBin(low=2600, high=2649), EloBin(low=3200, high=None), EloBin(low=None, high=None))
    """
    if index == ELO_N_BINS:
        return EloBin(None, None)
    low = ELO_LOWEST_EDGE + (index - 1) * ELO_BIN_WIDTH
    return EloBin(None if index == 0 else low, None if index == ELO_N_BINS - 1 else low + ELO_BIN_WIDTH - 1)


def _elo_token(index: int) -> str:
    low, high = elo_bin(index)
    if low is None and high is None:
        return "<elo:missing>"
    if low is None:
        return f"<elo:under{high + 1}>"  # type: ignore[operator]
    return f"<elo:{low}+>" if high is None else f"<elo:{low}-{high}>"


def _move_tokens() -> tuple[list[str], list[str]]:
    """The queen-and-knight moves and the promotions, each in vocabulary order."""
    plain: list[str] = []
    for start in range(64):
        file, rank = start % 8, start // 8
        for end in range(64):
            df, dr = end % 8 - file, end // 8 - rank
            queen_like = end != start and (df == 0 or dr == 0 or abs(df) == abs(dr))
            knight = {abs(df), abs(dr)} == {1, 2}
            if queen_like or knight:
                plain.append(square_name(start) + square_name(end))
    promotions: list[str] = []
    letters = sorted(PROMOTION_TYPES, key=PROMOTION_TYPES.__getitem__)  # n, b, r, q
    for start in [*range(8, 16), *range(48, 56)]:
        step = 8 if start >= 48 else -8
        for end in range(64):
            if end - start in (step - 1, step, step + 1) and abs(end % 8 - start % 8) <= 1:
                promotions.extend(square_name(start) + square_name(end) + letter for letter in letters)
    return plain, promotions


class UciEncoder:
    """The uci scheme as a :class:`~tokpack.chess.schemes.game_encoder.GameEncoder`.

    >>> encoder = UciEncoder()
    >>> ids = encoder.encode_game("e2e4 e7e5", 2612, None, "1-0", max_len=200)
    >>> len(ids), ids[0], ids[-2:]
    (7, 1, [4, 2])
    >>> encoder.decode(ids).uci
    'e2e4 e7e5'
    """

    scheme = "uci"
    record_kind = "chess"  # its kind in tokpack.engines.kinds.KINDS
    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __init__(self) -> None:
        plain, promotions = _move_tokens()
        assert len(plain) == N_QUEEN_AND_KNIGHT_MOVES and len(promotions) == N_PROMOTIONS
        elo = [_elo_token(i) for i in range(ELO_N_BINS + 1)]
        self.tokens: list[str] = [*SPECIAL_TOKENS, *elo, *plain, *promotions]
        self.ids: dict[str, int] = {token: i for i, token in enumerate(self.tokens)}
        # Move key (see ParsedMoves.keys) -> id; everything not in the table is <unk>.
        self._id_of_key = np.full(64 * 64 * N_PROMOTION_CODES, UNK_ID, dtype=np.uint16)
        for token_id in range(MOVES_FIRST_ID, VOCAB_SIZE):
            self._id_of_key[_key(self.tokens[token_id])] = token_id

    def vocab_size(self) -> int:
        return VOCAB_SIZE

    @cached_property
    def identity(self) -> VocabIdentity:
        rules = {"game": "<bos> white-elo black-elo moves... result <eos>", "elo": [ELO_LOWEST_EDGE, ELO_BIN_WIDTH, ELO_N_BINS]}
        return canonical_identity(self.scheme, self.tokens, rules)

    def encode_game(self, uci: str, white_elo: int | None, black_elo: int | None, result: str, max_len: int) -> list[int]:
        """``<bos>, white Elo, black Elo, one id per move, result, <eos>``, cut to ``max_len``.

        Raises:
            InputError: ``result`` is not one of 1-0, 0-1, 1/2-1/2, *.
        """
        outcome = result_id(result)
        moves = [self.ids.get(move, UNK_ID) if len(move) in (4, 5) else UNK_ID for move in uci.split()]
        ids = [BOS_ID, ELO_FIRST_ID + elo_bin_index(white_elo), ELO_FIRST_ID + elo_bin_index(black_elo),
               *moves, outcome, EOS_ID]
        return ids[:max_len]

    def encode_batch(self, games: pa.Table | pa.RecordBatch) -> EncodedGames:
        """Every game of ``games`` (columns uci, white_elo, black_elo, result), vectorized.

        Raises:
            GameError: naming the row of a null game or an unknown result.
        """
        parsed = parse_moves(games.column("uci"))
        keys = parsed.keys
        move_ids = self._id_of_key[np.maximum(keys, 0)]
        move_ids[keys < 0] = UNK_ID
        results = np.asarray([RESULT_IDS[r] for r in RESULTS], dtype=np.uint16)[result_indices(games.column("result"), RESULTS)]
        leading: list[np.ndarray | int] = [BOS_ID, ELO_FIRST_ID + _elo_bins(games.column("white_elo")),
                                           ELO_FIRST_ID + _elo_bins(games.column("black_elo"))]
        encoded = framed(move_ids, parsed.counts, leading, [results, EOS_ID])
        return EncodedGames(encoded.ids, encoded.lengths, unknown_moves=int(np.count_nonzero(move_ids == UNK_ID)))

    def decode(self, ids: list[int] | np.ndarray) -> DecodedGame:
        """Moves, result and the two rating bins of one framed game.

        Raises:
            InputError: ``ids`` is not ``<bos>, Elo, Elo, moves..., result, <eos>``.
        """
        ids = [int(i) for i in ids]
        if len(ids) < FRAMING or ids[0] != BOS_ID or ids[-1] != EOS_ID:
            raise InputError("not a whole game: expected <bos> ... <eos> with at least five ids")
        elo = [i - ELO_FIRST_ID for i in ids[1:3]]
        if not all(0 <= i <= ELO_N_BINS for i in elo):
            raise InputError(f"ids {ids[1:3]} are not two Elo bins")
        if self.tokens[ids[-2]] not in RESULT_IDS:
            raise InputError(f"id {ids[-2]} is not a result")
        moves = ids[3:-2]
        if any(not MOVES_FIRST_ID <= i < VOCAB_SIZE and i != UNK_ID for i in moves):
            raise InputError("a move id outside the move sections")
        return DecodedGame(" ".join(self.tokens[i] for i in moves), self.tokens[ids[-2]], elo_bin(elo[0]), elo_bin(elo[1]))


def _key(move: str) -> int:
    squares = [("abcdefgh".index(move[i]) + 8 * (int(move[i + 1]) - 1)) for i in (0, 2)]
    return (squares[0] * 64 + squares[1]) * N_PROMOTION_CODES + PROMOTION_TYPES.get(move[4:], 0)


def _elo_bins(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Vectorized :func:`elo_bin_index` (nulls and ratings <= 0 are missing)."""
    ratings = np.asarray(column.fill_null(0), dtype=np.int64)
    bins = np.clip((ratings - ELO_LOWEST_EDGE) // ELO_BIN_WIDTH + 1, 0, ELO_N_BINS - 1)
    return np.where(ratings <= 0, ELO_N_BINS, bins).astype(np.uint16)
