"""What every way of serving shares: the data a loader takes, the id dtypes it serves, and the
vocabulary check on every served batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokpack.errors import IntegrityError
from tokpack.store import TokenSource

#: What a loader serves from: a token source, or its directory.
Data = TokenSource | str | Path
#: The dtypes a loader serves ids, labels and positions in, by name.
DTYPES = {"int64": np.int64, "int32": np.int32}


def check_ids(ids: np.ndarray, source: TokenSource) -> None:
    """One reduction over a served batch: every id must be below ``n_vocab``.

    Raises:
        IntegrityError: naming ``source``, for an id a corrupt pack would otherwise serve.
    """
    n_vocab = source.vocabulary.n_vocab
    if ids.size and int(ids.max()) >= n_vocab:
        raise IntegrityError(f"id {int(ids.max())} outside the vocabulary (n_vocab {n_vocab})", where=source.path,
                             fix="the data is corrupt; find the damage with its verify() (or tokpack inspect, which verifies)")


__all__ = ["DTYPES", "Data", "check_ids"]
