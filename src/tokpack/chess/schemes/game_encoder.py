"""A scheme's encoder (:class:`GameEncoder`): the engines' encoder of kind ``"chess"``, and what it returns.

Every chess scheme is one :class:`GameEncoder`. To the engines (:mod:`tokpack.engines.encoders`)
it is an encoder like a text vocabulary's, of ``record_kind`` ``"chess"``: ``encoder.json``
records it and a worker rebuilds it through :func:`tokpack.chess.schemes.encoder_spec` and
:func:`tokpack.chess.schemes.encoder_from_spec`. It turns one game, given as its space-separated
UCI moves, the two ratings and the result, into token ids; :meth:`GameEncoder.encode_batch` does the same for a whole table of
games at once (that is what packing calls), and must give exactly the ids that
:meth:`GameEncoder.encode_game` gives game by game. Packing needs nothing else, so packing UCI
games never imports ``tokenizers`` and packing SAN games never imports the BPE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

import numpy as np

from tokpack.chess.board.results import RESULTS
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    import pyarrow as pa

#: The ids of the results a game may end with (the same in every scheme that has result tokens:
#: uci and bpe put them right after <pad> <bos> <eos> <unk>).
RESULT_IDS = {result: 4 + i for i, result in enumerate(RESULTS)}

#: Columns an encoder reads from a games table (``white_elo``/``black_elo`` may hold nulls).
GAME_COLUMNS = ("uci", "white_elo", "black_elo", "result")


class EloBin(NamedTuple):
    """A rating bin: inclusive bounds, ``None`` where the bin is open.

    ``EloBin(None, None)`` is the bin of a missing rating.

    >>> EloBin(2600, 2649).contains(2612), EloBin(None, 649).contains(100), EloBin(None, None).contains(None)
    (True, True, True)
    """

    low: int | None
    high: int | None

    def contains(self, rating: int | None) -> bool:
        """Whether ``rating`` (``None`` or ``<= 0`` meaning missing) falls in this bin."""
        if rating is None or rating <= 0:
            return self.low is None and self.high is None
        if self.low is None and self.high is None:
            return False
        return (self.low is None or rating >= self.low) and (self.high is None or rating <= self.high)


class DecodedGame(NamedTuple):
    """What ids say about a game.

    ``white_elo``/``black_elo`` are the rating bins for the uci scheme and ``None`` for the
    schemes that do not encode ratings (san, bpe, char, position); ``result`` is ``None`` for
    the schemes that do not encode it (char, position).
    """

    uci: str
    result: str | None
    white_elo: EloBin | None = None
    black_elo: EloBin | None = None


@dataclass(frozen=True)
class EncodedGames:
    """Many games' documents, concatenated: document ``i`` is ``ids[offsets[i]:offsets[i + 1]]``.

    A game is one document, except where ``documents`` says how many each game made, in order
    (the position scheme makes one a position). ``unknown_moves`` counts the moves that became
    ``<unk>`` (the uci and bpe schemes map a move they cannot spell to ``<unk>`` and count it;
    they never drop it).
    """

    ids: np.ndarray
    lengths: np.ndarray
    unknown_moves: int = 0
    documents: np.ndarray | None = None

    @property
    def offsets(self) -> np.ndarray:
        """``n_documents + 1`` offsets into :attr:`ids`, the first 0."""
        return np.concatenate(([0], np.cumsum(self.lengths, dtype=np.int64)))

    def game(self, index: int) -> list[int]:
        """The ids of document ``index`` (game ``index`` where a game is one document) as a list."""
        offsets = self.offsets
        return self.ids[offsets[index] : offsets[index + 1]].tolist()

    def documents_per_game(self) -> np.ndarray:
        """How many documents each game made (ones where a game is one document).

        >>> EncodedGames(np.zeros(4, np.uint16), np.array([2, 2])).documents_per_game().tolist()
        [1, 1]
        """
        return np.ones(len(self.lengths), dtype=np.int64) if self.documents is None else self.documents


@runtime_checkable
class GameEncoder(Protocol):
    """A scheme's encoder: what packing, statistics and the parity fixture need from a scheme, and
    to the engines an encoder of kind ``"chess"``."""

    scheme: str
    record_kind: str  # "chess": the engines' kind of job and encoder (tokpack.engines.kinds.KINDS)
    pad_id: int

    def vocab_size(self) -> int:
        """The number of ids (every id is below it)."""
        ...

    @property
    def identity(self) -> VocabIdentity:
        """The vocabulary identity packs record and :func:`tokpack.require_vocabulary` checks."""
        ...

    def encode_game(self, uci: str, white_elo: int | None, black_elo: int | None, result: str, max_len: int) -> list[int]:
        """The ids of one game, framing included, cut to the first ``max_len``."""
        ...

    def encode_batch(self, games: pa.Table | pa.RecordBatch) -> EncodedGames:
        """The ids of every game of a table with :data:`GAME_COLUMNS`, whole (never cut), a
        document a game (or, with :attr:`EncodedGames.documents`, several)."""
        ...

    def decode(self, ids: list[int] | np.ndarray) -> DecodedGame:
        """Invert :meth:`encode_game` (for the uci scheme, ratings come back as their bins)."""
        ...


class GameError(InputError):
    """A game a table cannot encode; ``row`` is its index in the table given to the encoder.

    >>> str(GameError(3, "ply 5 (e2e5): not a pawn move").at("games.parquet", 1000))
    'games.parquet: row 1003: ply 5 (e2e5): not a pawn move'
    """

    def __init__(self, row: int, detail: str, where: str = "") -> None:
        super().__init__(f"{where}: row {row}: {detail}" if where else f"row {row}: {detail}")
        self.row, self.detail, self.where = row, detail, where

    def __reduce__(self) -> tuple[type[GameError], tuple[int, str, str]]:
        return GameError, (self.row, self.detail, str(self.where or ""))  # so it crosses process boundaries

    def at(self, where: str, first_row: int) -> GameError:
        """The same error in ``where``, a table whose row 0 is this table's row ``first_row``."""
        return GameError(self.row + first_row, self.detail, where)


def result_indices(results: pa.Array | pa.ChunkedArray, known: tuple[str, ...]) -> np.ndarray:
    """Each row's index in ``known``.

    Raises:
        GameError: naming the first row whose result is null or not in ``known``.
    """
    import pyarrow.compute as pc

    index = pc.index_in(results, value_set=_string_array(known))
    if index.null_count:
        row = int(np.flatnonzero(np.asarray(index.is_null()))[0])
        raise GameError(row, f"result {results[row].as_py()!r} is not one of {', '.join(known)}")
    return np.asarray(index, dtype=np.int64)


def framed(body: np.ndarray, counts: np.ndarray, leading: Sequence[np.ndarray | int], trailing: Sequence[np.ndarray | int],
           dtype: type = np.uint16) -> EncodedGames:
    """Every game's ids: its ``leading`` framing ids, its ``counts[g]`` ids of ``body``, its ``trailing`` ones.

    Each framing entry is one id for every game or an array of one id per game. Vectorized: the
    body is placed with one scatter, whatever the number of games.

    >>> framed(np.array([7, 8, 9]), np.array([2, 1]), [1], [np.array([4, 5]), 2]).ids.tolist()
    [1, 7, 8, 4, 2, 1, 9, 5, 2]
    """
    frame = len(leading) + len(trailing)
    lengths = counts.astype(np.int64) + frame
    ends = np.cumsum(lengths)
    begins = ends - lengths
    ids: np.ndarray = np.empty(int(ends[-1]) if len(ends) else 0, dtype=dtype)
    # Body id k of game g lands after g's leading ids and the framing ids of every earlier game.
    ids[np.arange(len(body)) + np.repeat(frame * np.arange(len(counts)) + len(leading), counts)] = body
    for offset, value in enumerate(leading):
        ids[begins + offset] = value
    for offset, value in enumerate(trailing):
        ids[ends - len(trailing) + offset] = value
    return EncodedGames(ids=ids, lengths=lengths)


def one_game_ids(encoder: GameEncoder, uci: str, max_len: int) -> list[int]:
    """The ids ``encoder.encode_batch`` gives one game of UCI moves, cut to ``max_len``: how an
    encoder whose ids come from the moves alone answers ``encode_game``.

    Raises:
        InputError: an illegal move, naming its ply.
    """
    import pyarrow as pa

    try:
        encoded = encoder.encode_batch(pa.table({"uci": [uci]}))
    except GameError as error:
        raise InputError(error.detail) from None
    return encoded.ids[:max_len].tolist()


def result_id(result: str) -> int:
    """The id of a result token (the same in every scheme that has them).

    Raises:
        InputError: ``result`` is not one of 1-0, 0-1, 1/2-1/2, *.
    """
    if result not in RESULT_IDS:
        raise InputError(f"result {result!r} is not one of {', '.join(RESULTS)}")
    return RESULT_IDS[result]


def _string_array(values: tuple[str, ...]) -> pa.Array:
    import pyarrow as pa

    return pa.array(list(values), type=pa.string())


def canonical_identity(scheme: str, tokens: list[str], rules: Mapping[str, object]) -> VocabIdentity:
    """The identity of a vocabulary given as its tokens in id order plus the rules that place them.

    ``rules`` holds whatever else changes ids for the same tokens (framing, text layout, BPE
    merges); the hash covers the compact, key-sorted JSON of all three.

    >>> canonical_identity("demo", ["<pad>", "a"], {"frame": "none"}).n_vocab
    2
    """
    import hashlib
    import json

    payload = json.dumps({"scheme": scheme, "tokens": tokens, "rules": rules}, sort_keys=True,
                         separators=(",", ":"), ensure_ascii=True)
    return VocabIdentity(scheme=scheme, sha256=hashlib.sha256(payload.encode("ascii")).hexdigest(), n_vocab=len(tokens))
