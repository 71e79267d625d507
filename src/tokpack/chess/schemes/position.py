"""The position scheme: every position of a game as ChessBench's 77 FEN tokens, then the move played as one of its 1,968 actions.

This is the input of DeepMind's "Grandmaster-level chess without search" (ChessBench,
``google-deepmind/searchless_chess``): a position is its FEN (python-chess's ``board.fen()``)
spelled as 77 tokens over a 31-symbol alphabet, and the move as an action id. A game of ``n``
moves becomes ``n`` documents of 78 ids (or a deterministic sample of them), each the position
before a move followed by that move:

- token 0: the side to move (``w``, or ``b``);
- tokens 1-64: the squares from a8 to h1, rank by rank, each a piece letter or ``.`` for empty
  (FEN's digits written out as that many ``.``);
- tokens 65-68: the castling rights as FEN writes them (``KQkq``, a subset in that order),
  ``.``-padded to four (``-`` is four ``.``);
- tokens 69-70: the en passant square (``e3``), or ``..`` (FEN names it only when a pawn may
  legally take there, as python-chess does);
- tokens 71-73 and 74-76: the half-move clock and the full-move number in decimal, each
  ``.``-padded on the right to three characters;
- id 77 (the 78th): the move, as its action.

Ids are ChessBench's own, so its model (one embedding of 1,968 rows) trains on them unchanged:
a state token is its character's index in ``0123456789abcdefghpnrkqPBNRQKw.`` (``b`` is one
token for the file, the black bishop and Black to move), and an action is a move's index in
ChessBench's list: for each from-square a1, b1, ..., h8, the squares a queen on an empty board
reaches from it (ascending), then the squares a knight reaches (ascending); then the
promotions, from the 2nd rank to the 1st and then from the 7th to the 8th, file by file: the
straight move, the capture towards the a-file, the capture towards the h-file, each to a queen,
rook, bishop and knight. State and action ids overlap (0-30); a token's place in its row says
which it is. ``<pad>`` is id 1,968, which no position uses.

Served rows of one position each: ``PackedBatches(dataset, layout="bestfit", length=77)`` (a row
holds ``length + 1`` ids: the 77 state ids as inputs, the move as the last label).

>>> encoder = PositionEncoder()
>>> ids = encoder.encode_game("e2e4 e7e5", None, None, "1-0", max_len=1000)
>>> len(ids), encoder.decode_position(ids[78:156])
(156, DecodedPosition(fen='rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1', move='e7e5'))
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tokpack.chess.schemes._uci_moves import PROMOTION_TYPES, parse_moves
from tokpack.chess.schemes._uci_to_san import replay_positions
from tokpack.chess.schemes.game_encoder import DecodedGame, EncodedGames, GameError, canonical_identity, one_game_ids
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    import pyarrow as pa

#: ChessBench's state alphabet: a state token is its character's index here.
STATE_CHARACTERS = "0123456789abcdefghpnrkqPBNRQKw."
#: State tokens of a position, and ids of a row (the state, then the action).
STATE_LENGTH = 77
ROW_LENGTH = STATE_LENGTH + 1
#: Padding: one id past the actions (a row never holds it).
PAD_ID = 1968
_FILES = "abcdefgh"
_ID = {character: i for i, character in enumerate(STATE_CHARACTERS)}
#: The squares in FEN's order: a8 .. h8, a7 .. h7, ..., a1 .. h1.
_FEN_SQUARES = np.array([rank * 8 + file for rank in range(7, -1, -1) for file in range(8)])
#: A signed piece (black negative) + 6 -> its state token.
_PIECE_IDS = np.array([_ID[c] for c in "kqrbnp.PNBRQK"], dtype=np.uint16)


def _square(square: int) -> str:
    return _FILES[square % 8] + str(square // 8 + 1)


def _actions() -> list[str]:
    """ChessBench's actions, in order (see the module docstring)."""
    moves = []
    for start in range(64):
        file, rank = start % 8, start // 8
        steps = [(s % 8 - file, s // 8 - rank, s) for s in range(64) if s != start]
        queen = [s for df, dr, s in steps if df == 0 or dr == 0 or abs(df) == abs(dr)]
        knight = [s for df, dr, s in steps if {abs(df), abs(dr)} == {1, 2}]
        moves += [_square(start) + _square(end) for end in queen + knight]
    for rank, last in ((1, 0), (6, 7)):
        for file in range(8):
            for target in (file, file - 1, file + 1):
                if 0 <= target < 8:
                    moves += [_square(rank * 8 + file) + _square(last * 8 + target) + piece for piece in "qrbn"]
    return moves


ACTIONS: tuple[str, ...] = tuple(_actions())
N_ACTIONS = len(ACTIONS)
if N_ACTIONS != PAD_ID:
    raise ImportError(f"{N_ACTIONS} actions, not ChessBench's 1,968")
ACTION_IDS: dict[str, int] = {move: i for i, move in enumerate(ACTIONS)}


def _key(move: str) -> int:
    squares = [_FILES.index(move[i]) + 8 * (int(move[i + 1]) - 1) for i in (0, 2)]
    return (squares[0] * 64 + squares[1]) * 6 + PROMOTION_TYPES.get(move[4:], 0)


_ACTION_OF_KEY = np.full(64 * 64 * 6, -1, dtype=np.int32)  # ParsedMoves.keys -> action (-1: none)
for _action, _move in enumerate(ACTIONS):
    _ACTION_OF_KEY[_key(_move)] = _action


def _number_ids() -> np.ndarray:
    """Tokens of 0 .. 999 as three characters, '.'-padded on the right."""
    return np.array([[_ID[c] for c in f"{n:<3}".replace(" ", ".")] for n in range(1000)], dtype=np.uint16)


def _castling_ids() -> np.ndarray:
    """Tokens of the 16 sets of castling rights (1 K, 2 Q, 4 k, 8 q): FEN's letters, '.'-padded."""
    rows = []
    for rights in range(16):
        letters = "".join(letter for bit, letter in zip((1, 2, 4, 8), "KQkq", strict=True) if rights & bit)
        rows.append([_ID[c] for c in letters.ljust(4, ".")])
    return np.array(rows, dtype=np.uint16)


def _en_passant_ids() -> np.ndarray:
    """Tokens of the en passant square (row ``s + 1`` for square ``s``; row 0: none)."""
    rows = [[_ID["."], _ID["."]]] + [[_ID[_FILES[s % 8]], _ID[str(s // 8 + 1)]] for s in range(64)]
    return np.array(rows, dtype=np.uint16)


_NUMBERS, _CASTLING, _EN_PASSANT = _number_ids(), _castling_ids(), _en_passant_ids()


class DecodedPosition(NamedTuple):
    """A position's FEN (as python-chess's ``board.fen()`` writes it) and the move played there (UCI)."""

    fen: str
    move: str


def fen_ids(fen: str) -> list[int]:
    """The 77 state tokens of a FEN (a position to ask a model about; packing reads boards, not FENs).

    Raises:
        InputError: not a six-field FEN, or a clock or move number of more than three digits.

    >>> fen_ids("8/8/8/8/8/8/8/K6k w - - 0 1")[:2], len(fen_ids("8/8/8/8/8/8/8/K6k w - - 0 1"))
    ([29, 30], 77)
    """
    fields = fen.split(" ")
    if len(fields) != 6:
        raise InputError(f"not a FEN of six fields: {fen!r}")
    board, side, castling, en_passant, halfmove, fullmove = fields
    squares = "".join("." * int(c) if c.isdigit() else c for c in board.replace("/", ""))
    if len(squares) != 64 or len(castling) > 4 or len(halfmove) > 3 or len(fullmove) > 3:
        raise InputError(f"{fen!r} cannot be spelled in 77 tokens (64 squares, at most 4 castling letters, "
                         "3 digits of clock and of move number)")
    text = (side + squares + castling.replace("-", "").ljust(4, ".") + en_passant.replace("-", "..")
            + halfmove.ljust(3, ".") + fullmove.ljust(3, "."))
    try:
        return [_ID[c] for c in text]
    except KeyError as error:
        raise InputError(f"{fen!r} holds {error.args[0]!r}, which no FEN token spells") from None


def encode_position(fen: str, move: str) -> list[int]:
    """One row: the 77 state tokens of ``fen``, then the action of ``move`` (UCI).

    Raises:
        InputError: as :func:`fen_ids`, or a move that is no action.

    >>> encode_position("8/8/8/8/8/8/8/K6k w - - 0 1", "a1b1")[-1]
    0
    """
    if move not in ACTION_IDS:
        raise InputError(f"{move!r} is none of the 1,968 actions")
    return [*fen_ids(fen), ACTION_IDS[move]]


def positions_kept(keys: np.ndarray, counts: np.ndarray, sample: float, seed: int) -> np.ndarray:
    """Which moves' positions a sample of ``sample`` keeps: a hash of the game's moves, the ply
    and ``seed`` below ``sample``, so the choice depends on the game alone, never on how the
    games are batched, and ``seed`` picks another sample.

    >>> counts = np.array([3, 2])
    >>> keys = np.array([1, 2, 3, 1, 2], dtype=np.int64)
    >>> positions_kept(keys, counts, 1.0, 0).tolist()
    [True, True, True, True, True]
    """
    if sample >= 1.0:
        return np.ones(len(keys), dtype=bool)
    ply = np.arange(len(keys), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    with np.errstate(over="ignore"):
        mixed = _mix(keys.astype(np.uint64) + ply.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        game_hash = np.zeros(len(counts), dtype=np.uint64)
        played = counts > 0
        if played.any():
            game_hash[played] = np.bitwise_xor.reduceat(mixed, (np.cumsum(counts) - counts)[played])
        position = _mix(np.repeat(game_hash, counts) ^ _mix(ply.astype(np.uint64) + np.uint64(seed) * np.uint64(0xBF58476D1CE4E5B9)))
    return (position >> np.uint64(11)).astype(np.float64) * 2.0**-53 < sample


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a well-mixed 64-bit hash of each value."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class PositionEncoder:
    """The position scheme as a :class:`~tokpack.chess.schemes.game_encoder.GameEncoder` (a game is many documents).

    ``sample`` keeps that share of a game's positions (deterministically, see
    :func:`positions_kept`; ``seed`` draws another sample); 1.0 keeps them all. The vocabulary,
    and so the identity, is the same for any sample.
    """

    scheme = "position"
    record_kind = "chess"  # its kind in tokpack.engines.kinds.KINDS
    pad_id = PAD_ID
    tokens: tuple[str, ...] = (*ACTIONS, "<pad>")

    def __init__(self, sample: float = 1.0, seed: int = 0) -> None:
        if not 0.0 < sample <= 1.0:
            raise InputError(f"sample must be above 0 and at most 1, got {sample}")
        self.sample, self.seed = float(sample), int(seed)

    def vocab_size(self) -> int:
        return PAD_ID + 1

    @cached_property
    def identity(self) -> VocabIdentity:
        rules = {"row": "77 state ids (side, a8..h1, castling, en passant, half-move clock, full-move number), "
                        "then the move's action id", "state": STATE_CHARACTERS}
        return canonical_identity(self.scheme, list(self.tokens), rules)

    def encode_batch(self, games: pa.Table | pa.RecordBatch) -> EncodedGames:
        """The rows of every kept position of every game of ``games`` (column ``uci``), in order.

        Raises:
            GameError: an illegal, malformed or null move (its row and ply), or a game longer
                than three digits of move numbers can spell.
        """
        parsed = parse_moves(games.column("uci"))
        keep = positions_kept(parsed.keys, parsed.counts, self.sample, self.seed)
        positions = replay_positions(parsed)
        long = np.flatnonzero((positions.halfmove > 999) | (positions.ply // 2 + 1 > 999))
        if len(long):
            first_moves = np.cumsum(parsed.counts) - parsed.counts
            game = int(np.searchsorted(first_moves, long[0], side="right") - 1)
            raise GameError(game, f"ply {int(positions.ply[long[0]]) + 1}: a clock or move number of four digits, "
                                  "which ChessBench's 77 tokens cannot spell")
        rows = np.flatnonzero(keep)
        ids = np.empty((len(rows), ROW_LENGTH), dtype=np.uint16)
        ply = positions.ply[rows]
        ids[:, 0] = np.where(ply % 2 == 0, _ID["w"], _ID["b"])
        ids[:, 1:65] = _PIECE_IDS[positions.board[rows][:, _FEN_SQUARES] + 6]
        ids[:, 65:69] = _CASTLING[positions.rights[rows]]
        ids[:, 69:71] = _EN_PASSANT[positions.en_passant[rows].astype(np.int64) + 1]
        ids[:, 71:74] = _NUMBERS[positions.halfmove[rows]]
        ids[:, 74:77] = _NUMBERS[ply // 2 + 1]
        ids[:, 77] = _ACTION_OF_KEY[parsed.keys[rows]]  # a legal move is always an action
        documents = np.add.reduceat(keep, np.cumsum(parsed.counts) - parsed.counts) if len(keep) else np.zeros(0, np.int64)
        documents = np.where(parsed.counts > 0, documents, 0).astype(np.int64)
        return EncodedGames(ids=ids.reshape(-1), lengths=np.full(len(rows), ROW_LENGTH, dtype=np.int64),
                            documents=documents)

    def encode_game(self, uci: str, white_elo: int | None, black_elo: int | None, result: str, max_len: int) -> list[int]:
        """The rows of the game's kept positions, one after another, cut to ``max_len`` (ratings and result are not encoded).

        Raises:
            InputError: an illegal move, naming its ply.
        """
        return one_game_ids(self, uci, max_len)

    def decode_position(self, ids: list[int] | np.ndarray) -> DecodedPosition:
        """The FEN and the move of one row (the inverse of :func:`encode_position`).

        Raises:
            InputError: not 77 state tokens and an action.
        """
        ids = [int(i) for i in ids]
        if len(ids) != ROW_LENGTH or not all(0 <= i < len(STATE_CHARACTERS) for i in ids[:STATE_LENGTH]):
            raise InputError(f"not a position's row: expected {STATE_LENGTH} state ids (0-30) and an action")
        if not 0 <= ids[-1] < N_ACTIONS:
            raise InputError(f"id {ids[-1]} is no action")
        text = "".join(STATE_CHARACTERS[i] for i in ids[:STATE_LENGTH])
        side, squares = text[0], text[1:65]
        ranks = []
        for rank in range(8):
            row = squares[rank * 8:(rank + 1) * 8]
            spelled, empty = "", 0
            for character in row:
                if character == ".":
                    empty += 1
                    continue
                spelled += (str(empty) if empty else "") + character
                empty = 0
            ranks.append(spelled + (str(empty) if empty else ""))
        castling = text[65:69].rstrip(".") or "-"
        en_passant = "-" if text[69:71] == ".." else text[69:71]
        fen = " ".join(["/".join(ranks), "w" if side == "w" else "b", castling, en_passant,
                        text[71:74].rstrip("."), text[74:77].rstrip(".")])
        return DecodedPosition(fen, ACTIONS[ids[-1]])

    def decode(self, ids: list[int] | np.ndarray) -> DecodedGame:
        """The moves of a game's rows (every position kept; the result is not encoded).

        Raises:
            InputError: ids that are not whole rows.
        """
        ids = [int(i) for i in ids]
        if len(ids) % ROW_LENGTH:
            raise InputError(f"{len(ids)} ids are not whole rows of {ROW_LENGTH}")
        moves = [self.decode_position(ids[i:i + ROW_LENGTH]).move for i in range(0, len(ids), ROW_LENGTH)]
        return DecodedGame(" ".join(moves), None)
