"""Split a column of space-separated UCI games into per-move arrays, without a loop per move.

The column's UTF-8 bytes are read straight from its Arrow buffers; a move is a maximal run of
non-space bytes inside one game. Squares follow python-chess (``a1`` = 0, ``b1`` = 1, ...,
``h8`` = 63) and promotions its piece types (knight 2, bishop 3, rook 4, queen 5; 0 for none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tokpack.chess.schemes.game_encoder import GameError

if TYPE_CHECKING:
    import pyarrow as pa

#: Promotion letter (lower case, as UCI writes it) -> python-chess piece type.
PROMOTION_TYPES = {"n": 2, "b": 3, "r": 4, "q": 5}
#: Number of distinct promotion codes (0 = none, 1 unused, 2..5 as above).
N_PROMOTION_CODES = 6

_PROMOTION_LUT = np.full(256, 255, dtype=np.uint8)
for _letter, _piece in PROMOTION_TYPES.items():
    _PROMOTION_LUT[ord(_letter)] = _piece


@dataclass(frozen=True)
class ParsedMoves:
    """Every move of a column of games, in game order.

    ``counts[g]`` is the number of moves of game ``g``; ``well_formed`` is false for a move that
    is not ``[a-h][1-8][a-h][1-8]`` with an optional ``[nbrq]`` (its squares are then 0), and
    ``null`` true for UCI's null move ``0000`` (a pass, which python-chess spells ``--``).
    """

    from_square: np.ndarray
    to_square: np.ndarray
    promotion: np.ndarray
    well_formed: np.ndarray
    null: np.ndarray
    counts: np.ndarray

    @property
    def keys(self) -> np.ndarray:
        """One integer per move, ``(from * 64 + to) * 6 + promotion``; -1 where malformed."""
        keys = (self.from_square.astype(np.int32) * 64 + self.to_square) * N_PROMOTION_CODES + self.promotion
        return np.where(self.well_formed, keys, -1)

    def move_text(self, index: int) -> str:
        """The UCI spelling of move ``index`` (for error messages)."""
        if self.null[index]:
            return "0000"
        if not self.well_formed[index]:
            return "(malformed)"
        squares = [int(self.from_square[index]), int(self.to_square[index])]
        text = "".join("abcdefgh"[s % 8] + str(s // 8 + 1) for s in squares)
        letters = {v: k for k, v in PROMOTION_TYPES.items()}
        return text + letters.get(int(self.promotion[index]), "")


def parse_moves(column: pa.Array | pa.ChunkedArray) -> ParsedMoves:
    """Parse a string column of games (moves separated by spaces) into :class:`ParsedMoves`.

    Raises:
        GameError: naming the first row whose game is null.

    >>> import pyarrow as pa
    >>> parsed = parse_moves(pa.array(["e2e4 e7e5", "", "a7a8q"]))
    >>> parsed.counts.tolist(), parsed.from_square.tolist(), parsed.promotion.tolist()
    ([2, 0, 1], [12, 52, 48], [0, 0, 5])
    """
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if column.null_count:
        row = int(np.flatnonzero(np.asarray(column.is_null()))[0])
        raise GameError(row, "the uci moves are null")
    if pa.types.is_string(column.type):
        offset_type = np.int32
    elif pa.types.is_large_string(column.type):
        offset_type = np.int64
    else:
        column = column.cast(pa.large_string())
        offset_type = np.int64
    _, offsets_buffer, data_buffer = column.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[column.offset : column.offset + len(column) + 1]
    offsets = offsets.astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    text = np.frombuffer(data_buffer, dtype=np.uint8)[first:last] if last > first else np.zeros(0, np.uint8)
    edges = offsets - first
    n_bytes = len(text)

    # A move starts at a non-space byte that follows a space or a game edge, and ends at one that
    # precedes a space or a game edge; games are not separated in the buffer, hence the edges.
    edge = np.zeros(n_bytes + 1, dtype=bool)
    edge[edges] = True
    is_space = text == 32
    after_break = edge[:-1].copy()
    after_break[1:] |= is_space[:-1]
    before_break = edge[1:].copy()
    before_break[:-1] |= is_space[1:]
    solid = ~is_space
    starts = np.flatnonzero(solid & after_break)
    ends = np.flatnonzero(solid & before_break) + 1
    lengths = ends - starts
    counts = np.diff(np.searchsorted(starts, edges))

    # Five bytes from each start (clipped at the end of the buffer: only a short, hence
    # malformed, last move reads past it).
    head = np.take(text, starts[:, None] + np.arange(5), mode="clip") if n_bytes else np.zeros((0, 5), np.uint8)
    head[lengths < 5, 4] = 0
    from_file = head[:, 0] - np.uint8(97)
    from_rank = head[:, 1] - np.uint8(49)
    to_file = head[:, 2] - np.uint8(97)
    to_rank = head[:, 3] - np.uint8(49)
    promotion = _PROMOTION_LUT[head[:, 4]]
    promotion[lengths == 4] = 0
    well_formed = (
        (from_file < 8) & (from_rank < 8) & (to_file < 8) & (to_rank < 8)
        & ((lengths == 4) | ((lengths == 5) & (promotion != 255)))
    )
    null = np.zeros(len(starts), dtype=bool)
    odd = np.flatnonzero(~well_formed)  # rare: only these can be the null move 0000
    null[odd] = (lengths[odd] == 4) & (head[odd, :4] == ord("0")).all(axis=1)
    promotion[~well_formed] = 0
    from_square = (from_rank.astype(np.int16) * 8 + from_file)
    to_square = (to_rank.astype(np.int16) * 8 + to_file)
    from_square[~well_formed] = 0
    to_square[~well_formed] = 0
    return ParsedMoves(from_square, to_square, promotion.astype(np.int16), well_formed, null, counts.astype(np.int64))
