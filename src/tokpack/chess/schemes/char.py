"""The char scheme: Adam Karvonen's character-level games (``;1.e4 e5 2.Nf3 ...``), and his nanoGPT's blocks of 1,024 characters.

Karvonen's chess models (his nanoGPT fork and ``chess_llm_interpretability``, trained on the
``adamkarvonen/chess_games`` dataset) read a game as ``;`` followed by its numbered SAN movetext
(move numbers glued to White's move, one space between moves, ``+`` and ``#`` kept, no result),
one id a character over a 32-symbol alphabet: his ``meta.pkl`` maps `` #+-.0123456789;=BKNOQRabcdefghx``
to 0..31 in that (ASCII) order. Here a game is one document of those ids; ``<pad>`` is id 32,
which no game uses, so the ids a model of his reads are exactly his.

His training data are blocks of 1,024 characters, each starting at a game's ``;`` and running on
through the games after it, the last one cut where the block ends; the next block starts at the
next game (:func:`block_starts`). :func:`write_blocks` writes a pack's games so, as a flat
``uint8`` file (his ``train.bin``/``val.bin``, read with ``numpy.memmap(path, dtype=numpy.uint8)``),
and :func:`write_meta` his ``meta.pkl``.

>>> encoder = CharEncoder()
>>> "".join(encoder.tokens[i] for i in encoder.encode_game("e2e4 e7e5 g1f3", None, None, "*", max_len=100))
';1.e4 e5 2.Nf3'
"""

from __future__ import annotations

import pickle
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tokpack.chess.schemes._uci_moves import parse_moves
from tokpack.chess.schemes.game_encoder import DecodedGame, EncodedGames, canonical_identity, framed, one_game_ids
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    import pyarrow as pa

    from tokpack.store import TokenSource

#: Karvonen's alphabet, in the order of its ids.
ALPHABET = " #+-.0123456789;=BKNOQRabcdefghx"
#: A game starts with this character.
GAME_START = ";"
PAD_ID = len(ALPHABET)
#: Characters a block of Karvonen's training data holds.
BLOCK = 1024
_ID_OF_BYTE = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(ALPHABET):
    _ID_OF_BYTE[ord(_c)] = _i


class CharEncoder:
    """The char scheme as a :class:`~tokpack.chess.schemes.game_encoder.GameEncoder` (ratings and result are not encoded)."""

    scheme = "char"
    record_kind = "chess"  # its kind in tokpack.engines.kinds.KINDS
    pad_id = PAD_ID
    tokens: tuple[str, ...] = (*ALPHABET, "<pad>")

    def vocab_size(self) -> int:
        return len(self.tokens)

    @cached_property
    def identity(self) -> VocabIdentity:
        rules = {"game": "';' then the numbered SAN movetext '1.e4 e5 2.Nf3 ...', no result", "ratings": "not encoded"}
        return canonical_identity(self.scheme, list(self.tokens), rules)

    def encode_batch(self, games: pa.Table | pa.RecordBatch) -> EncodedGames:
        """Every game of ``games`` (column ``uci``), replayed in lockstep to spell its SAN.

        Raises:
            GameError: naming the row and ply of an illegal move.
        """
        from tokpack.chess.schemes.san import movetext_bytes

        text, lengths = movetext_bytes(parse_moves(games.column("uci")), None)
        return framed(_ID_OF_BYTE[text], lengths, [ALPHABET.index(GAME_START)], [])

    def encode_game(self, uci: str, white_elo: int | None, black_elo: int | None, result: str, max_len: int) -> list[int]:
        """``;`` and the game's numbered SAN movetext, cut to ``max_len``.

        Raises:
            InputError: an illegal move, naming its ply.
        """
        return one_game_ids(self, uci, max_len)

    def decode(self, ids: list[int] | np.ndarray) -> DecodedGame:
        """The UCI moves of one game (``;`` and its movetext), by replaying its SAN with python-chess.

        Raises:
            InputError: not a game's ids, or movetext python-chess cannot replay.
        """
        return DecodedGame(" ".join(moves_of_text(self.text(ids))), None)

    def text(self, ids: list[int] | np.ndarray) -> str:
        """The characters of ``ids``.

        Raises:
            InputError: an id outside the alphabet.
        """
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= len(ALPHABET)):
            raise InputError(f"ids outside the {len(ALPHABET)} characters of the alphabet")
        return np.frombuffer(ALPHABET.encode("ascii"), np.uint8)[ids].tobytes().decode("ascii")


def moves_of_text(text: str) -> list[str]:
    """The UCI moves of one game written ``;1.e4 e5 2.Nf3`` (a block's last game may be cut short: its last whole move is kept).

    Raises:
        InputError: text that does not start with ``;``, or a move python-chess cannot play.

    >>> moves_of_text(";1.e4 e5 2.Nf3 Nc6 3.B")
    ['e2e4', 'e7e5', 'g1f3', 'b8c6']
    """
    import chess

    if not text.startswith(GAME_START):
        raise InputError(f"a game starts with {GAME_START!r}: {text[:20]!r}")
    board, moves = chess.Board(), []
    words = text[1:].split(" ")
    for number, word in enumerate(words):
        san = word.split(".")[-1]
        try:
            move = board.parse_san(san)
        except ValueError:
            if number == len(words) - 1:  # the cut end of a block
                break
            raise InputError(f"{san!r} is not a legal move in {board.fen()}") from None
        moves.append(move.uci())
        board.push(move)
    return moves


def block_starts(starts: np.ndarray, size: int = BLOCK) -> np.ndarray:
    """The documents (by index) where blocks of ``size`` ids start: the first document, then
    each time the first document that starts at or after the end of the block before.

    Vectorized by pointer doubling (each document's next block start, then that of the one after,
    and so on), so a billion characters cost a few dozen numpy passes, not a loop per block.

    >>> block_starts(np.array([0, 3, 5, 9, 10]), size=4).tolist()
    [0, 2, 3]
    """
    n = len(starts)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    following = np.append(np.searchsorted(starts, starts + size, side="left"), n)  # n: past the end, and stays there
    jumps = [following]
    while (1 << len(jumps)) <= n:
        jumps.append(jumps[-1][jumps[-1]])
    count, at = 1, 0  # blocks: the first, then every jump that lands on a document
    for level in range(len(jumps) - 1, -1, -1):
        if jumps[level][at] != n:
            at = int(jumps[level][at])
            count += 1 << level
    steps = np.arange(count)
    blocks = np.zeros(count, dtype=np.int64)
    for level, jump in enumerate(jumps):
        blocks = np.where((steps >> level) & 1, jump[blocks], blocks)
    return blocks


def write_blocks(source: TokenSource, out: Path, *, size: int = BLOCK, documents: tuple[int, int] | None = None) -> int:
    """Write the char games of ``source`` (documents ``[first, last)``, default all) to ``out`` as
    blocks of ``size`` characters (:func:`block_starts`; a last block shorter than ``size`` is left
    out, as every block of Karvonen's data is whole), one ``uint8`` id a character. Returns the blocks written.

    Raises:
        InputError: ``source`` is not a pack of the char scheme, or ``out`` exists.
    """
    from tokpack._atomic import partial_sibling

    if source.vocabulary != CharEncoder().identity:
        raise InputError(f"holds the {source.vocabulary.scheme} scheme's ids, not the char scheme's", where=source.path,
                         fix="pack the games with the char scheme (chess's tokenize with scheme='char', pack=True)")
    out = Path(out)
    if out.exists():
        raise InputError("already exists", where=out)
    first, last = documents if documents is not None else (0, source.n_docs)
    starts = np.asarray(source.starts[first:last], dtype=np.int64)
    end = int(source.starts[last]) if last < source.n_docs else source.n_tokens
    blocks = block_starts(starts, size)
    origins = starts[blocks]
    origins = origins[origins + size <= end]
    partial = partial_sibling(out)
    try:
        with open(partial, "wb") as handle:
            for begin in range(0, len(origins), 4096):  # 4 MiB of blocks at a time
                rows = source.gather_rows(origins[begin:begin + 4096], size)
                handle.write(np.ascontiguousarray(rows, dtype=np.uint8).tobytes())
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return len(origins)


def write_meta(out: Path) -> None:
    """Karvonen's ``meta.pkl``: ``vocab_size``, ``itos`` and ``stoi`` of the 32 characters (a
    pickle, the file his nanoGPT's ``train.py`` reads to size its embedding)."""
    meta = {"vocab_size": len(ALPHABET), "itos": dict(enumerate(ALPHABET)),
            "stoi": {c: i for i, c in enumerate(ALPHABET)}}
    Path(out).write_bytes(pickle.dumps(meta))


def export_blocks(packed: Path, out: Path, *, size: int = BLOCK) -> dict[str, int]:
    """Karvonen's training files from char packs: ``out/train.bin`` from ``packed/train`` and
    ``out/val.bin`` from ``packed/val`` (the folder ``tokpack chess tokenize --scheme char --pack``
    writes), or ``out/train.bin`` alone from ``packed`` when it is one pack; and ``out/meta.pkl``.
    ``out`` appears complete or not at all. Returns the blocks written to each file.

    Raises:
        InputError: ``out`` exists, or ``packed`` holds no char pack.
    """
    from tokpack._atomic import building
    from tokpack.store import open_tokens

    packed, out = Path(packed), Path(out)
    if out.exists():
        raise InputError("already exists; choose a new folder", where=out)
    splits = {"train": packed / "train", "val": packed / "val"}
    if not splits["train"].is_dir():
        splits = {"train": packed}
    written = {}
    with building(out) as staging:
        for name, folder in splits.items():
            if folder.is_dir() or name == "train":
                written[name] = write_blocks(open_tokens(folder), staging / f"{name}.bin", size=size)
        write_meta(staging / "meta.pkl")
    return written
