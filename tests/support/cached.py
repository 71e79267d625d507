"""Expensive generated test inputs, kept across runs in pytest's cache folder (``.pytest_cache``).

A key names everything the input depends on (the generator's source, python-chess's version, the
arguments), so a changed generator or python-chess makes a new entry. Without the cache plugin
(``-p no:cacheprovider``) the input is generated every time. Parallel workers may write the
same entry: each writes its own temporary file and renames it into place, so a reader sees a
whole entry or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import chess
import pytest
import zstandard

import lichess_games

_GENERATOR = Path(lichess_games.__file__)


def cached_lichess_pgn(config: pytest.Config, n_games: int, seed: int) -> tuple[str, list[str]]:
    """:func:`lichess_games.lichess_pgn` ``(n_games, seed)``, from the cache when an earlier run made it."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return lichess_games.lichess_pgn(n_games, seed=seed)
    key = hashlib.sha256(b"\0".join([_GENERATOR.read_bytes(), chess.__version__.encode(), f"{n_games},{seed}".encode()]))
    entry = Path(cache.mkdir("tokpack-lichess-pgn")) / f"{key.hexdigest()[:32]}.json.zst"
    try:
        record = json.loads(zstandard.ZstdDecompressor().decompress(entry.read_bytes()))
        return record["text"], record["truth"]
    except (OSError, ValueError, KeyError, zstandard.ZstdError):
        pass  # not made yet, or unreadable: make it again
    text, truth = lichess_games.lichess_pgn(n_games, seed=seed)
    data = zstandard.ZstdCompressor(level=3).compress(json.dumps({"text": text, "truth": truth}).encode())
    handle, temporary = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temporary, entry)
    return text, truth
