"""The parity fixture: real games with every scheme's ids, for another implementation to match.

:func:`build_parity` reads a PGN strictly (a corrupt fixture is worse than none: the first
unusable game raises) and encodes each game with each encoder; :func:`write_parity` writes the
result so that the same inputs always give the same bytes (stable order, sorted keys,
``indent=0``, ASCII, ``\\n`` line ends, a trailing newline). :func:`choose_parity_games` is how
the committed 20-game fixture was picked from the real collection: games that between them
cover every result, both castlings of both sides, an under-promotion and the other cases of
:data:`FEATURES`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from tokpack._atomic import write_atomically
from tokpack._schema import Record, read_record
from tokpack.chess.pgn.games import PgnGame, read_games, read_games_strictly
from tokpack.chess.schemes.game_encoder import GameEncoder
from tokpack.chess.schemes.san import san_moves, san_text
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity

#: What the committed fixture must show between its games.
FEATURES = ("1-0", "0-1", "1/2-1/2", "white O-O", "white O-O-O", "black O-O", "black O-O-O", "under-promotion",
            "promotion to a queen", "en passant", "checkmate", "disambiguated move", "over 200 plies")


class ParityGame(Record):
    """One game of the fixture: what it is, and every scheme's ids for it (whole, never cut)."""

    id: str
    white_elo: int
    black_elo: int
    result: str
    uci: str
    san: str = Field(description="numbered SAN movetext, without the result")
    ids: dict[str, list[int]]


class ParityFixture(Record):
    """``parity.json``: the games and the identity of each vocabulary that encoded them."""

    schema_: Literal["tokpack.chess.parity.v1"] = Field(default="tokpack.chess.parity.v1", alias="schema")
    source: str
    vocabularies: dict[str, VocabIdentity]
    games: list[ParityGame]


def build_parity(pgn: Path, encoders: Sequence[GameEncoder]) -> ParityFixture:
    """Every game of ``pgn`` with the ids of each encoder.

    Raises:
        InputError: naming the file and byte offset of the first unusable game.
    """
    games = read_games_strictly(Path(pgn))
    entries = []
    for game in games:
        moves = san_moves(game.uci)
        ids = {e.scheme: e.encode_game(game.uci, game.white_elo, game.black_elo, game.result, max_len=1 << 30)
               for e in encoders}
        entries.append(ParityGame(id=game.id, white_elo=game.white_elo, black_elo=game.black_elo, result=game.result,
                                  uci=game.uci, san=san_text(moves, game.result).rsplit(" ", 1)[0] if moves else "",
                                  ids=ids))
    return ParityFixture(source=Path(pgn).name, vocabularies={e.scheme: e.identity for e in encoders}, games=entries)


def parity_text(fixture: ParityFixture) -> str:
    """The exact text :func:`write_parity` writes."""
    return json.dumps(fixture.model_dump(mode="json", by_alias=True), indent=0, ensure_ascii=True, sort_keys=True) + "\n"


def write_parity(fixture: ParityFixture, path: Path) -> None:
    """Write ``fixture`` deterministically and atomically (a temporary sibling renamed)."""
    write_atomically(Path(path), parity_text(fixture).encode("ascii"))


def read_parity(path: Path) -> ParityFixture:
    """Read and validate a parity fixture.

    Raises:
        InputError: naming the file and the first problem.
    """
    return read_record(ParityFixture, Path(path))


def features(game: PgnGame) -> set[str]:
    """Which of :data:`FEATURES` a game shows (by replaying it with python-chess)."""
    import chess

    found = {game.result}
    board = chess.Board()
    for text in game.uci.split():
        move = chess.Move.from_uci(text)
        colour = "white" if board.turn == chess.WHITE else "black"
        if board.is_castling(move):
            found.add(f"{colour} {'O-O' if chess.square_file(move.to_square) > 4 else 'O-O-O'}")
        if move.promotion:
            found.add("promotion to a queen" if move.promotion == chess.QUEEN else "under-promotion")
        if board.is_en_passant(move):
            found.add("en passant")
        san = board.san(move)
        if san[0] in "NBRQ" and len(san.rstrip("+#").replace("x", "")) > 3:
            found.add("disambiguated move")
        board.push(move)
    if board.is_checkmate():
        found.add("checkmate")
    if game.n_plies > 200:
        found.add("over 200 plies")
    return found & set(FEATURES)


def choose_parity_games(pgn: Path, n_games: int = 20) -> list[tuple[int, int]]:
    """Pick ``n_games`` games of a PGN: each next game the first that adds a missing feature,
    then the first games not yet picked; returned as ``(start, end)`` byte ranges, in file order.

    Raises:
        InputError: the file holds fewer than ``n_games`` usable games.
    """
    offsets: list[int] = []
    usable: list[tuple[int, PgnGame]] = []
    for offset, game in read_games(Path(pgn)):
        offsets.append(offset)
        if isinstance(game, PgnGame):
            usable.append((len(offsets) - 1, game))
    offsets.append(Path(pgn).stat().st_size)
    if len(usable) < n_games:
        raise InputError(f"{len(usable)} usable games, fewer than {n_games}", where=pgn)
    missing, chosen = set(FEATURES), []  # type: ignore[var-annotated]
    shown = [(index, features(game)) for index, game in usable]
    while missing and len(chosen) < n_games:
        best = max(shown, key=lambda pair: (len(pair[1] & missing), -pair[0]))
        if not best[1] & missing:
            break
        chosen.append(best[0])
        missing -= best[1]
    chosen += [index for index, _ in usable if index not in chosen][: n_games - len(chosen)]
    return [(offsets[i], offsets[i + 1]) for i in sorted(chosen)]
