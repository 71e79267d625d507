"""Expensive generated test inputs, and python-chess's readings of them (the oracle), kept across
runs in pytest's cache folder (``.pytest_cache``).

A key names everything an entry depends on (the generator's source, python-chess's version, the
arguments: for a reading, the text and the collector's source), so a changed generator, text or
python-chess makes a new entry. Without the cache plugin
(``-p no:cacheprovider``) the input is generated every time. Parallel workers may write the
same entry: each writes its own temporary file and renames it into place, so a reader sees a
whole entry or none.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chess
import chess.pgn
import pytest
import zstandard

import lichess_games

_GENERATOR = Path(lichess_games.__file__)


def cached_lichess_pgn(config: pytest.Config, n_games: int, seed: int) -> tuple[str, list[str]]:
    """:func:`lichess_games.lichess_pgn` ``(n_games, seed)``, from the cache when an earlier run made it."""
    def make() -> dict[str, Any]:
        text, truth = lichess_games.lichess_pgn(n_games, seed=seed)
        return {"text": text, "truth": truth}

    record = _cached(config, "tokpack-lichess-pgn", f"{n_games},{seed}", make)
    return record["text"], record["truth"]


def cached_python_chess_reading(config: pytest.Config, text: str) -> list[tuple[list[str], list[str]]]:
    """python-chess's reading of every game of the PGN ``text`` (``chess.pgn.read_game`` with
    :class:`tokpack.chess.pgn.read.Collector`): each game's main-line UCI moves and errors, the
    oracle of the reader's tests, from the cache when an earlier run read the same text with the
    same python-chess and collector."""
    import inspect

    from tokpack.chess.pgn.read import Collector

    def make() -> dict[str, Any]:
        handle, games = io.StringIO(text), []
        while (collector := chess.pgn.read_game(handle, Visitor=Collector)) is not None:  # type: ignore[arg-type]
            games.append((collector.moves, collector.errors))
        return {"games": games}

    key = hashlib.sha256(text.encode("utf-8", "surrogateescape") + inspect.getsource(Collector).encode()).hexdigest()
    return [(moves, errors) for moves, errors in _cached(config, "tokpack-python-chess-reading", key, make)["games"]]


def cached_sharp_games(config: pytest.Config, n_games: int, seed: int) -> list[tuple[str, str]]:
    """``n_games`` of :func:`lichess_games.sharp_game` from ``random.Random(seed)`` (UCI moves and
    result each), from the cache when an earlier run made them."""
    def make() -> dict[str, Any]:
        rng = random.Random(seed)
        return {"games": [lichess_games.sharp_game(rng) for _ in range(n_games)]}

    return [(uci, result) for uci, result in _cached(config, "tokpack-sharp-games", f"{n_games},{seed}", make)["games"]]


def cached_random_games(config: pytest.Config, n_games: int, seed: int, mate_every: int) -> list[tuple[list[str], list[str]]]:
    """``n_games`` of :func:`lichess_games.random_game` from ``random.Random(seed)``, every
    ``mate_every``-th mating when it can (the first among them), from the cache when an earlier run made them."""
    def make() -> dict[str, Any]:
        rng = random.Random(seed)
        return {"games": [lichess_games.random_game(rng, mates=i % mate_every == 0) for i in range(n_games)]}

    record = _cached(config, "tokpack-random-games", f"{n_games},{seed},{mate_every}", make)
    return [(sans, ucis) for sans, ucis in record["games"]]


def _cached(config: pytest.Config, folder: str, arguments: str, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    cache = getattr(config, "cache", None)
    if cache is None:
        return make()
    key = hashlib.sha256(b"\0".join([_GENERATOR.read_bytes(), chess.__version__.encode(), arguments.encode()]))
    entry = Path(cache.mkdir(folder)) / f"{key.hexdigest()[:32]}.json.zst"
    try:
        record: dict[str, Any] = json.loads(zstandard.ZstdDecompressor().decompress(entry.read_bytes()))
        return record
    except (OSError, ValueError, zstandard.ZstdError):
        pass  # not made yet, or unreadable: make it again
    record = make()
    data = zstandard.ZstdCompressor(level=3).compress(json.dumps(record).encode())
    handle, temporary = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temporary, entry)
    return record
