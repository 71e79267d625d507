"""Arrow columns made from spans of a byte buffer by numba: one copy of the bytes, no Python object per value.

The converter keeps a chunk's values as spans of the chunk's bytes (a game's tag values) or of
the buffer the resolver wrote (its UCI moves); :func:`string_array` gathers them into the data
buffer of an Arrow string array, and :func:`list_array` gathers runs of a float array into a
list array, as ``pa.array`` of the same Python values would build them; :func:`numbers` wraps a
numpy array. Each is built from its buffers: ``pa.array`` imports pandas when it is installed
(to ask whether its argument is a pandas object), a large share of a reading process's start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    import pyarrow as pa


@njit(nogil=True, cache=True)
def _gather(source: np.ndarray, starts: np.ndarray, ends: np.ndarray, offsets: np.ndarray, data: np.ndarray) -> None:
    p = 0
    offsets[0] = 0
    for i in range(len(starts)):
        s = starts[i]
        if s >= 0:
            n = ends[i] - s
            data[p:p + n] = source[s:s + n]
            p += n
        offsets[i + 1] = p


def string_array(source: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The strings ``source[starts[i]:ends[i]]`` (null where ``starts[i]`` is negative) as an Arrow
    string array; ``source`` is ``uint8``.

    A value whose bytes are not UTF-8 (a PGN file written in Latin-1, say) has each undecodable
    byte read as U+FFFD, as ``bytes.decode("utf-8", "replace")`` reads it: a string column holds
    UTF-8 only.
    """
    import pyarrow as pa

    present = starts >= 0
    total = int(np.where(present, ends - starts, 0).sum())
    if total >= 2**31:
        raise ValueError(f"{total:,} bytes of strings in one column: more than 32-bit offsets hold")
    n = len(starts)
    offsets = np.empty(n + 1, dtype=np.int32)
    data = np.empty(total, dtype=np.uint8)
    _gather(source, starts, ends, offsets, data)
    nulls = n - int(np.count_nonzero(present))
    bitmap = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    buffers = (pa.py_buffer(offsets), pa.py_buffer(data), bitmap, nulls)
    strings = pa.StringArray.from_buffers(n, *buffers)
    try:
        strings.validate(full=True)  # UTF-8 throughout
    except pa.ArrowInvalid:
        raw = pa.BinaryArray.from_buffers(n, *buffers).to_pylist()
        return pa.array([None if value is None else value.decode("utf-8", "replace") for value in raw], pa.string())
    return strings


def list_array(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Lists of ``values[starts[i]:starts[i] + lengths[i]]`` (float64; NaN read as null) as an
    Arrow list array."""
    import pyarrow as pa

    offsets = np.zeros(len(starts) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    taken = np.ascontiguousarray(values[np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])],
                                 dtype=np.float64)
    missing = np.isnan(taken)
    nulls = int(np.count_nonzero(missing))
    bitmap = pa.py_buffer(np.packbits(~missing, bitorder="little")) if nulls else None
    items = pa.Array.from_buffers(pa.float64(), len(taken), [bitmap, pa.py_buffer(taken)], null_count=nulls)
    return pa.ListArray.from_arrays(numbers(offsets), items)


def numbers(values: np.ndarray) -> pa.Array:
    """A one-dimensional numpy array of numbers as the Arrow array of its type (no nulls).

    >>> numbers(np.array([3, 1], dtype=np.int32)).to_pylist()
    [3, 1]
    """
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])
