"""The san scheme: one token per character of the game's numbered SAN movetext.

A game is ``<bos>``, the characters of ``1.e4 e5 2.Nf3 Nc6 ... 1-0`` (move numbers glued to
White's move, one space between moves, one space before the result; a game without moves is
just its result), then ``<eos>``. The two ratings are **not** encoded: the encoder takes them
only to share :class:`~tokpack.chess.schemes.game_encoder.GameEncoder`'s signature.

Ids: ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2, ``<unk>`` 3, then the 33 characters SAN, move
numbers and results use, in ASCII order (37 ids in all).

SAN comes from replaying the game. :meth:`SanEncoder.encode_game` replays it with python-chess
(the reference, a Python call per ply); :meth:`SanEncoder.encode_batch` replays a whole table in
lockstep with numpy (:mod:`tokpack.chess.schemes._uci_to_san`) and gives the same ids much faster.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from tokpack.chess.board.results import RESULTS
from tokpack.chess.schemes._uci_moves import ParsedMoves, parse_moves
from tokpack.chess.schemes._uci_to_san import replay_san
from tokpack.chess.schemes.game_encoder import (
    DecodedGame,
    EncodedGames,
    GameError,
    canonical_identity,
    framed,
    result_id,
    result_indices,
)
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    import pyarrow as pa

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
CHARACTERS = " #*+-./0123456789=BKNOQRabcdefghx"
TOKENS = (*SPECIAL_TOKENS, *CHARACTERS)
#: Highest full-move number the batch encoder spells (four digits).
MAX_MOVE_NUMBER = 9999

_ID_OF_BYTE = np.full(256, UNK_ID, dtype=np.uint8)
_ID_OF_BYTE[0] = PAD_ID  # zero bytes are the padding of the SAN rows; they are dropped
for _i, _c in enumerate(CHARACTERS):
    _ID_OF_BYTE[ord(_c)] = len(SPECIAL_TOKENS) + _i


def san_moves(uci: str) -> list[str]:
    """The SAN of each move of a game from the standard start, by python-chess.

    Raises:
        InputError: a move that is malformed or illegal, naming its ply.

    >>> san_moves("e2e4 e7e5 g1f3 b8c6 f1b5 a7a6")
    ['e4', 'e5', 'Nf3', 'Nc6', 'Bb5', 'a6']
    """
    import chess

    board = chess.Board()
    spelled: list[str] = []
    for ply, text in enumerate(uci.split(), start=1):
        try:
            move = chess.Move.from_uci(text)
        except ValueError:
            raise InputError(f"ply {ply} ({text}): not a UCI move") from None
        if move and not board.is_legal(move):  # a null move (0000) is a pass, spelled --
            raise InputError(f"ply {ply} ({text}): illegal in {board.fen()}")
        spelled.append(board.san_and_push(move))
    return spelled


def san_text(moves: list[str], result: str) -> str:
    """The movetext this scheme spells: numbered SAN moves, then the result.

    >>> san_text(["e4", "e5", "Nf3"], "*"), san_text([], "1-0")
    ('1.e4 e5 2.Nf3 *', '1-0')
    """
    words = [f"{ply // 2 + 1}.{move}" if ply % 2 == 0 else move for ply, move in enumerate(moves)]
    return " ".join([*words, result])


def movetext_bytes(parsed: ParsedMoves, results: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Every game's numbered SAN movetext as :func:`san_text` spells it (``1.e4 e5 2.Nf3``), as
    ASCII bytes one game after another, and each game's length; with ``results`` (each game's
    index in ``RESULTS``), a space and the result follow (a game without moves is its result alone).

    Vectorized: the SAN comes from the lockstep replay, and the text is laid out as one row of
    bytes per piece (each move with its separator and number, each result), zero-padded to one
    width; reading the rows in order and dropping the zeros gives every game's text.

    Raises:
        GameError: naming the row and ply of an illegal move, or a game longer than the scheme spells.
    """
    counts = parsed.counts
    if len(counts) and counts.max() > 2 * MAX_MOVE_NUMBER:
        raise GameError(int(counts.argmax()), f"{int(counts.max())} plies: longer than the scheme spells")
    san = replay_san(parsed)
    width = 6 + san.shape[1]  # separator, four digits, '.', the move
    pieces = counts + (1 if results is not None else 0)
    rows = np.zeros((int(pieces.sum()), width), dtype=np.uint8)
    game_rows = np.cumsum(pieces) - pieces
    game = np.repeat(np.arange(len(counts)), counts)
    ply = np.arange(len(san)) - np.repeat(np.cumsum(counts) - counts, counts)
    move_rows = rows[game_rows[game] + ply]
    move_rows[:, 0] = np.where(ply > 0, ord(" "), 0)
    number = ply // 2 + 1
    white = ply % 2 == 0
    for column, power in enumerate((1000, 100, 10, 1), start=1):
        move_rows[:, column] = np.where(white & (number >= power), ord("0") + (number // power) % 10, 0)
    move_rows[:, 5] = np.where(white, ord("."), 0)
    move_rows[:, 6:] = san
    rows[game_rows[game] + ply] = move_rows
    if results is not None:
        endings = np.zeros((len(RESULTS), width), dtype=np.uint8)
        for i, result in enumerate(RESULTS):
            endings[i, : len(result) + 1] = np.frombuffer(f" {result}".encode("ascii"), np.uint8)
        rows[game_rows + counts] = endings[results]
        no_moves = game_rows[counts == 0]
        rows[no_moves, :-1] = rows[no_moves, 1:]  # no separator before the result of an empty game
    filled = rows != 0
    ends = np.concatenate(([0], np.cumsum(filled.sum(axis=1))))
    lengths = (ends[game_rows + pieces] - ends[game_rows]).astype(np.int64)
    return rows[filled], lengths


class SanEncoder:
    """Character-level SAN as a :class:`~tokpack.chess.schemes.game_encoder.GameEncoder`.

    >>> encoder = SanEncoder()
    >>> ids = encoder.encode_game("e2e4 e7e5", 2700, 2650, "1-0", max_len=1000)
    >>> "".join(encoder.tokens[i] for i in ids[1:-1])
    '1.e4 e5 1-0'
    >>> encoder.decode(ids)
    DecodedGame(uci='e2e4 e7e5', result='1-0', white_elo=None, black_elo=None)
    """

    scheme = "san"
    record_kind = "chess"  # its kind in tokpack.engines.kinds.KINDS
    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID
    tokens: tuple[str, ...] = TOKENS

    def vocab_size(self) -> int:
        return len(TOKENS)

    @cached_property
    def identity(self) -> VocabIdentity:
        rules = {"game": "<bos> chars of '1.e4 e5 2.Nf3 ... RESULT' <eos>", "ratings": "not encoded"}
        return canonical_identity(self.scheme, list(TOKENS), rules)

    def encode_game(self, uci: str, white_elo: int | None, black_elo: int | None, result: str, max_len: int) -> list[int]:
        """``<bos>``, the characters of the movetext, ``<eos>``, cut to ``max_len`` (ratings ignored).

        Raises:
            InputError: an illegal move, or a result that is not 1-0, 0-1, 1/2-1/2 or *.
        """
        result_id(result)  # refuse an unknown result before replaying
        text = san_text(san_moves(uci), result)
        ids = [BOS_ID, *_ID_OF_BYTE[np.frombuffer(text.encode("ascii"), dtype=np.uint8)].tolist(), EOS_ID]
        return ids[:max_len]

    def encode_batch(self, games: pa.Table | pa.RecordBatch) -> EncodedGames:
        """Every game of ``games`` (columns uci and result; ratings ignored), replayed in lockstep.

        Raises:
            GameError: naming the row and ply of an illegal move, or the row of an unknown result.
        """
        parsed = parse_moves(games.column("uci"))
        results = result_indices(games.column("result"), RESULTS)
        text, lengths = movetext_bytes(parsed, results)
        return framed(_ID_OF_BYTE[text], lengths, [BOS_ID], [EOS_ID])

    def decode(self, ids: list[int] | np.ndarray) -> DecodedGame:
        """The UCI moves and result of one framed game, by replaying its SAN.

        Raises:
            InputError: not ``<bos> ... <eos>``, or movetext python-chess cannot replay.
        """
        import chess

        ids = [int(i) for i in ids]
        if len(ids) < 3 or ids[0] != BOS_ID or ids[-1] != EOS_ID:
            raise InputError("not a whole game: expected <bos> ... <eos>")
        words = "".join(TOKENS[i] for i in ids[1:-1]).split(" ")
        board, moves = chess.Board(), []
        for word in words[:-1]:
            move = board.parse_san(word.split(".")[-1])
            moves.append(move.uci())
            board.push(move)
        if words[-1] not in RESULTS:
            raise InputError(f"{words[-1]!r} is not a result")
        return DecodedGame(" ".join(moves), words[-1])
