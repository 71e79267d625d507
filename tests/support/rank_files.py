"""Reading a tiktoken rank file in tests without tiktoken's path cache (no tests here).

``tiktoken.load.load_tiktoken_bpe`` goes through ``read_file_cached``, which caches any path,
local ones too, under ``sha1(path)``: a stale entry for the same path returns another file's ranks.
"""

from __future__ import annotations

import base64
from pathlib import Path


def read_ranks(path: Path) -> dict[bytes, int]:
    """The ranks of the tiktoken rank file at ``path`` (``base64-token rank`` per line), read now."""
    with open(path, "rb") as lines:
        return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in lines if line.strip())}
