"""What each scheme costs on real games: tokens per game, share that fits, the longest BPE tokens.

Every count is what the scheme's encoder really emits for a whole game, framing included
(five ids for uci, three for bpe, two for san, whose result is part of its text), because that
is what training pays for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from tokpack._schema import Record
from tokpack.chess.schemes.game_encoder import GAME_COLUMNS, GameEncoder
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    import pyarrow as pa


class SchemeStats(Record):
    """Tokens per game of one scheme over the sampled games."""

    vocabulary: VocabIdentity
    mean: float
    p50: float
    p95: float
    max: int
    within_max_len: float = Field(description="percent of games whose whole encoding has at most max_len ids")


class LongToken(Record):
    """A learnt BPE token and its length in characters and in moves (four characters a move)."""

    token: str
    n_chars: int
    moves: float


class ChessStats(Record):
    """``stats.json``: the three schemes compared on the same first ``n_games`` games."""

    schema_: Literal["tokpack.chess.stats.v1"] = Field(default="tokpack.chess.stats.v1", alias="schema")
    source: str
    n_games: int
    max_len: int
    schemes: dict[str, SchemeStats]
    bpe_longest: list[LongToken] = Field(default_factory=list)


def first_games(games: Path, n_games: int) -> pa.Table:
    """The first ``n_games`` rows of a games parquet (the encoders' columns), read batch by batch.

    Raises:
        InputError: the file cannot be read as a games table.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # Without pre-buffering: with it, pyarrow keeps every row group it has read until the
        # file is closed, and memory grows with the table.
        reader = pq.ParquetFile(games, pre_buffer=False)
    except (OSError, ValueError) as error:
        raise InputError(f"not a readable parquet file ({error})", where=games) from None
    columns = list(GAME_COLUMNS)
    missing = [c for c in columns if c not in reader.schema_arrow.names]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", where=games)
    batches, kept = [], 0
    with reader:
        for batch in reader.iter_batches(batch_size=min(max(n_games, 1), 65_536), columns=columns):
            batches.append(batch.slice(0, n_games - kept))
            kept += batches[-1].num_rows
            if kept >= n_games:
                break
    schema = pa.schema([reader.schema_arrow.field(c) for c in columns])
    return pa.Table.from_batches(batches, schema=schema)


def summarize(lengths: np.ndarray, vocabulary: VocabIdentity, max_len: int) -> SchemeStats:
    """Mean, median, 95th percentile (numpy's linear interpolation), max and share within ``max_len``.

    >>> from tokpack.vocab.identity import VocabIdentity
    >>> s = summarize(np.array([3, 5, 10]), VocabIdentity(scheme="x", sha256="0" * 64, n_vocab=9), 5)
    >>> s.mean, s.p50, s.within_max_len
    (6.0, 5.0, 66.67)
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    return SchemeStats(vocabulary=vocabulary, mean=round(float(lengths.mean()), 2),
                       p50=round(float(np.percentile(lengths, 50)), 2), p95=round(float(np.percentile(lengths, 95)), 2),
                       max=int(lengths.max()), within_max_len=round(float((lengths <= max_len).mean() * 100), 2))


def compute_stats(games: Path, encoders: Sequence[GameEncoder], n_games: int, max_len: int, n_longest: int = 10) -> ChessStats:
    """Statistics of each encoder over the first ``n_games`` games of ``games``.

    Raises:
        InputError: the file is unreadable or empty, or a game cannot be encoded.
    """
    table = first_games(Path(games), n_games)
    if table.num_rows == 0:
        raise InputError("no games", where=games)
    schemes = {e.scheme: summarize(e.encode_batch(table).lengths, e.identity, max_len) for e in encoders}
    longest = []
    for encoder in encoders:
        if hasattr(encoder, "longest_tokens"):
            longest = [LongToken(token=t, n_chars=n, moves=n / 4) for t, n in encoder.longest_tokens(n_longest)]
    return ChessStats(source=Path(games).name, n_games=table.num_rows, max_len=max_len, schemes=schemes, bpe_longest=longest)
