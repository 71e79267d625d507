"""tiktoken's rank files: one ``base64-token rank`` line per token, read (all lines at once by numpy
where the file is laid out as tiktoken writes one) and written.

Each reader returns plain data (ranks as ``{token bytes: id}``); building an encoder from it is
:mod:`tokpack.vocab.bytelevel`'s job. The formats that list merges (GPT-2's pair, ``tokenizer.json``)
are :mod:`tokpack.vocab.merge_files`'.
"""

from __future__ import annotations

import base64
import binascii
import os
import sys
from collections.abc import Callable
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tokpack.errors import InputError

if TYPE_CHECKING:
    import numpy as np


Ranks = dict[bytes, int]
#: Ids and ranks are stored as unsigned 32-bit integers: each is below this.
RANK_LIMIT = 1 << 32

#: Strict base64 decoding straight from binascii (``base64.b64decode`` wraps it with checks that
#: cost more than the decoding on a 50k-line rank file); Python 3.10 lacks ``strict_mode``.
_decode_b64: Callable[[bytes], bytes]
if sys.version_info >= (3, 11):
    _decode_b64 = partial(binascii.a2b_base64, strict_mode=True)
else:
    _decode_b64 = partial(base64.b64decode, validate=True)


class TokenTable(NamedTuple):
    """Tokens as three arrays instead of a dict of bytes objects: token ``k`` is
    ``joined[ends[k - 1]:ends[k]]`` (from 0 for the first), its id ``ids[k]`` (``int64``); no token
    and no id repeated. What the compiled encoder's tables are built from, without a Python object
    per token (:meth:`ranks` makes the dict when something asks for it).

    >>> table = TokenTable.of({b"a": 0, b"bc": 5})
    >>> table.tokens(), table.ids.tolist(), table.ranks()
    ([b'a', b'bc'], [0, 5], {b'a': 0, b'bc': 5})
    """

    joined: bytes
    ends: np.ndarray
    ids: np.ndarray

    @classmethod
    def of(cls, ranks: Ranks) -> TokenTable:
        """The table of ``ranks``, tokens in the dict's order."""
        import numpy as np

        tokens = list(ranks)
        ends = np.cumsum(np.fromiter(map(len, tokens), np.int64, count=len(tokens)))
        return cls(b"".join(tokens), ends, np.fromiter(ranks.values(), np.int64, count=len(tokens)))

    def lengths(self) -> np.ndarray:
        """Each token's length in bytes."""
        import numpy as np

        return np.diff(self.ends, prepend=np.int64(0))

    def tokens(self) -> list[bytes]:
        """The tokens, as bytes, in the table's order: sliced from :attr:`joined` one by one,
        which makes the list in less CPU time than :func:`_token_bytes`' padded arrays (the
        compiled extension writes a ``tokenizer.json`` from the table's arrays without it)."""
        ends, joined = self.ends.tolist(), self.joined
        return [joined[begin:end] for begin, end in zip([0, *ends[:-1]], ends)]

    def ranks(self) -> Ranks:
        """The tokens and their ids as a dict, in the table's order."""
        return dict(zip(self.tokens(), self.ids.tolist()))


def parse_rank_table(text: bytes, *, where: str | os.PathLike[str]) -> tuple[TokenTable, bool]:
    """:func:`parse_rank_text`'s ranks as a :class:`TokenTable` (tokens in the file's order), and
    whether ``text`` is canonical. A file laid out as tiktoken writes one is read by the compiled
    extension, without a Python object per token; any other (or without the extension) as
    :func:`parse_rank_text` reads it.

    >>> table, canonical = parse_rank_table(b"YQ== 0\\nYg== 1\\n", where="ranks")
    >>> table.tokens(), table.ids.tolist(), canonical
    ([b'a', b'b'], [0, 1], True)

    Raises:
        InputError: as :func:`parse_rank_lines`.
    """
    from tokpack.vocab.compiled import parse_ranks

    found = parse_ranks(text)
    if found is not None:
        return TokenTable(*found[:3]), found[3]
    ranks, canonical = parse_rank_text(text, where=where)
    return TokenTable.of(ranks), canonical


def read_rank_file(path: Path) -> Ranks:
    """Read a tiktoken rank file: one ``base64-token rank`` per line.

    Raises:
        InputError: a malformed line (named by number), a repeated token or a repeated rank, a
            gzip-compressed file, or a file cut short.
    """
    with open(path, "rb") as handle:
        return parse_rank_text(handle.read(), where=path)[0]


#: The fix of a malformed line of a rank file.
_RANK_LINE_FIX = "each line is a base64 token, one space and its rank (a tiktoken .tiktoken file)"


def parse_rank_text(text: bytes, *, where: str | os.PathLike[str]) -> tuple[Ranks, bool]:
    """:func:`parse_rank_lines`, and whether ``text`` is exactly the canonical text of the ranks
    (:func:`rank_file_lines`'s, as tiktoken's published files are), so it can stand for it.

    A file laid out as tiktoken writes one (``base64 rank`` and a newline on every line) is read
    by numpy, all lines at once; any other layout, or one that holds a mistake, line by line (the
    errors name the line).

    >>> parse_rank_text(b"YQ== 0\\nYg== 1\\n", where="ranks")
    ({b'a': 0, b'b': 1}, True)
    >>> parse_rank_text(b"Yg== 1\\nYQ== 0\\n", where="ranks")  # the same ranks, not in rank order
    ({b'b': 1, b'a': 0}, False)
    """
    found = _parse_tiktoken_layout(text)
    if found is not None:
        return found
    ranks = parse_rank_lines(text, where=where)
    return ranks, False


#: Each byte's value in base64 (``=``: 0), and which bytes base64 allows (``=`` apart).
_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
#: 10**0 .. 10**10: the place values of a rank's digits (ranks have at most 10).
_POWERS_OF_TEN = [10**k for k in range(11)]


@lru_cache(maxsize=1)
def _base64_tables() -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    values = np.zeros(256, np.uint8)
    allowed = np.zeros(256, bool)
    values[np.frombuffer(_BASE64, np.uint8)] = np.arange(64, dtype=np.uint8)
    allowed[np.frombuffer(_BASE64, np.uint8)] = True
    return values, allowed


def _parse_tiktoken_layout(text: bytes) -> tuple[Ranks, bool] | None:
    """The ranks of ``text`` if every line is ``base64 rank`` and a newline (padded base64 of at
    least one byte, a decimal rank below 2**32), no token or rank repeated, and whether it is
    canonical; ``None`` for anything else (the line-by-line parse decides).

    Its arrays are the size of the text or of its lines (masks of bytes, not indices of them): a
    rank file is read once per process, and the pages a larger array first touches cost the
    kernel more than numpy's work on them."""
    import numpy as np

    data = np.frombuffer(text, np.uint8)
    if not len(data) or data[-1] != ord("\n"):
        return None
    ends = np.flatnonzero(data == ord("\n"))
    spaces = np.flatnonzero(data == ord(" "))
    if len(spaces) != len(ends):
        return None
    count = len(ends)
    starts = np.zeros(count, np.int64)
    starts[1:] = ends[:-1] + 1
    sizes, digits = spaces - starts, ends - spaces - 1
    if np.any(sizes < 4) or np.any(sizes % 4) or np.any(digits < 1) or np.any(digits > 10):
        return None  # also a line without its space, or with two: some line's space is not in it
    # Each line is four runs of bytes: its token, its space, its rank's digits, its newline.
    parts = np.stack([sizes, np.ones_like(sizes), digits, np.ones_like(sizes)], axis=1).reshape(-1)
    chars = data[_each_run(np.array([True, False, False, False]), count, parts)]
    # Every byte is a token's, a rank's, a space or a newline: check the first two kinds.
    values, allowed = _base64_tables()
    last, second = data[spaces - 1] == ord("="), data[spaces - 2] == ord("=")
    pads = last.astype(np.int64) + second
    if (not np.all(allowed[chars] | (chars == ord("="))) or int(np.count_nonzero(chars == ord("="))) != int(pads.sum())
            or np.any(second & ~last)):
        return None
    rank_digits = data[_each_run(np.array([False, False, True, False]), count, parts)] - np.uint8(ord("0"))
    if np.any(rank_digits > 9):
        return None
    # A rank's digits right-aligned in ten columns (zeros to their left), read column by column.
    columns = np.zeros(count * 10, np.uint8)
    columns[_each_run(np.array([False, True]), count, np.stack([10 - digits, digits], axis=1).reshape(-1))] = rank_digits
    ranks = np.zeros(count, np.int64)
    for column in columns.reshape(count, 10).T:
        ranks *= 10
        ranks += column
    ascending = bool(np.all(ranks[1:] > ranks[:-1]))
    if np.any(ranks >= RANK_LIMIT) or (not ascending and np.any(np.diff(np.sort(ranks)) == 0)):
        return None
    # Four base64 digits make three bytes; a padded quantum's last one or two are not the token's.
    quanta = values[chars].reshape(-1, 4)
    raw = np.empty((len(quanta), 3), np.uint8)
    raw[:, 0] = quanta[:, 0] << 2 | quanta[:, 1] >> 4
    raw[:, 1] = quanta[:, 1] << 4 | quanta[:, 2] >> 2
    raw[:, 2] = quanta[:, 2] << 6 | quanta[:, 3]
    raw_ends = np.cumsum(sizes // 4 * 3)
    keep = np.ones(raw.size, bool)
    keep[raw_ends[pads >= 1] - 1] = False
    keep[raw_ends[pads == 2] - 2] = False
    lengths = sizes // 4 * 3 - pads
    found = dict(zip(_token_bytes(raw.reshape(-1)[keep], lengths), ranks.tolist()))
    if len(found) != count:
        return None
    # Canonical: in rank order, no leading zero, and the bits a padded quantum leaves over all 0.
    leftover = np.where(pads == 1, values[data[spaces - 2]] & 3, np.where(pads == 2, values[data[spaces - 3]] & 15, 0))
    canonical = (ascending and not np.any((digits > 1) & (data[spaces + 1] == ord("0")))
                 and not np.any(leftover))
    return found, canonical


def _each_run(flags: np.ndarray, times: int, lengths: np.ndarray) -> np.ndarray:
    """A mask of ``lengths.sum()`` bytes: ``flags`` repeated ``times`` times, the ``i``-th flag
    of the whole ``lengths[i]`` times.

    >>> import numpy as np
    >>> _each_run(np.array([True, False]), 2, np.array([1, 2, 2, 0])).tolist()
    [True, False, False, True, True]
    """
    import numpy as np

    return np.repeat(np.tile(flags, times), lengths)


#: Tokens up to this many bytes are made by numpy, as fixed-width byte strings.
_SHORT_TOKEN = 16


def _token_bytes(joined: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    """The tokens whose bytes follow one another in ``joined``, ``lengths[i]`` bytes the ``i``-th.

    Most are made at once: padded with zeros to :data:`_SHORT_TOKEN` bytes, numpy's fixed-width
    byte strings, which drop trailing zeros; a token that ends with a zero byte, or is longer, is
    sliced out on its own (a few in a published vocabulary).

    >>> import numpy as np
    >>> _token_bytes(np.frombuffer(b"ab\\x00c" + b"x" * 20, np.uint8), np.array([1, 2, 1, 20]))
    [b'a', b'b\\x00', b'c', b'xxxxxxxxxxxxxxxxxxxx']
    """
    import numpy as np

    ends = np.cumsum(lengths)
    short = (lengths <= _SHORT_TOKEN) & (joined[ends - 1] != 0)
    kept = lengths[short]
    padded = np.zeros(len(kept) * _SHORT_TOKEN, np.uint8)
    padded[_each_run(np.array([True, False]), len(kept), np.stack([kept, _SHORT_TOKEN - kept], axis=1).reshape(-1))] = (
        joined[np.repeat(short, lengths)])
    tokens = np.empty(len(lengths), object)
    tokens[short] = padded.view(f"S{_SHORT_TOKEN}").astype(object)
    others = np.flatnonzero(~short)
    if len(others):
        whole = joined.tobytes()
        for index, end, length in zip(others.tolist(), ends[others].tolist(), lengths[others].tolist()):
            tokens[index] = whole[end - length:end]
    return tokens.tolist()


def _runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` of every run, one after another.

    >>> import numpy as np
    >>> _runs(np.array([0, 10]), np.array([2, 3])).tolist()
    [0, 1, 10, 11, 12]
    """
    import numpy as np

    firsts = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum())) + np.repeat(starts - firsts, lengths)


def parse_rank_lines(text: bytes, *, where: str | os.PathLike[str]) -> Ranks:
    """Parse the text of a tiktoken rank file line by line (errors name ``where`` and the line).

    >>> parse_rank_lines(b"YQ== 0\\nYg== 1\\n", where="ranks")
    {b'a': 0, b'b': 1}
    >>> parse_rank_lines(b"YQ== 0\\nYg=", where="ranks")
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: ranks: line 2: the file looks truncated: its last line is malformed and no line end follows it; get the whole file again
    """
    if text[:2] == b"\x1f\x8b":
        raise InputError("is gzip-compressed, not a rank file's text", where=where,
                         fix="decompress it first (e.g. gunzip) and give the decompressed file")
    ranks: Ranks = {}
    # As tiktoken reads them: any line ends (\n, \r\n or \r alone), a UTF-8 byte order mark ignored.
    lines = text.removeprefix(b"\xef\xbb\xbf").splitlines()
    unfinished = bool(lines) and not text.endswith((b"\n", b"\r"))  # no line end after the last line

    def truncated(number: int) -> InputError | None:
        """The error for line ``number``, if it is the last, with no line end, after lines that parsed."""
        if unfinished and number == len(lines) > 1:
            return InputError("the file looks truncated: its last line is malformed and no line end follows it",
                              where=where, line=number, fix="get the whole file again")
        return None

    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            token_b64, rank_text = line.split()
            token, rank = _decode_b64(token_b64), int(rank_text)
        except (ValueError, binascii.Error):
            raise truncated(number) or InputError("expected 'base64-token rank'", where=where, line=number,
                                                  fix=_RANK_LINE_FIX) from None
        if not 0 <= rank < RANK_LIMIT:
            raise InputError(f"rank {rank} is outside [0, 2**32)", where=where, line=number,
                             fix="ranks are whole numbers counting up from 0, as in tiktoken's files")
        if token in ranks:
            raise truncated(number) or InputError(f"repeated token (rank {ranks[token]} and rank {rank})",
                                                  where=where, line=number, fix="each token may appear once")
        ranks[token] = rank
    if len(set(ranks.values())) != len(ranks):  # one set at the end, not one insertion a line
        seen: dict[int, int] = {}
        for number, line in enumerate(lines, start=1):
            if line.strip():
                rank = int(line.split()[1])
                if rank in seen:
                    raise truncated(number) or InputError(f"repeated rank {rank} (first on line {seen[rank]})",
                                                          where=where, line=number, fix="each rank may appear once")
                seen[rank] = number
    return ranks


def rank_file_lines(ranks: Ranks) -> bytes:
    """The canonical rank file text: one line per token, sorted by rank.

    >>> rank_file_lines({b"b": 1, b"a": 0})
    b'YQ== 0\\nYg== 1\\n'
    """
    import numpy as np

    tokens, order = in_rank_order(ranks)
    sizes = np.fromiter(map(len, tokens), np.int64, count=len(tokens))
    if not len(tokens) or not sizes.all():  # an empty token (no base64 at all): one line at a time
        encode = partial(binascii.b2a_base64, newline=False)
        return b"".join([encode(token) + b" %d\n" % rank for token, rank in zip(tokens, order.tolist())])
    # Each token's bytes padded with zeros to whole groups of three, each group four base64 digits.
    groups = (sizes + 2) // 3
    padded = np.zeros(int(groups.sum()) * 3, np.uint8)
    padded[_runs(3 * (np.cumsum(groups) - groups), sizes)] = np.frombuffer(b"".join(tokens), np.uint8)
    group = padded.reshape(-1, 3).astype(np.uint32)
    word = group[:, 0] << 16 | group[:, 1] << 8 | group[:, 2]
    alphabet = np.frombuffer(_BASE64, np.uint8)
    digits64 = alphabet[np.stack([word >> 18, word >> 12 & 63, word >> 6 & 63, word & 63], axis=1)].reshape(-1)
    ends = 4 * np.cumsum(groups)  # a group of one byte ends "==", of two "="
    digits64[ends[sizes % 3 == 1] - 2] = ord("=")
    digits64[ends[sizes % 3 != 0] - 1] = ord("=")
    numbers, counts = decimal_digits(order)
    widths = 4 * groups
    lines = widths + 1 + counts + 1  # base64, a space, the rank, a newline
    starts = np.cumsum(lines) - lines
    out = np.empty(int(lines.sum()), np.uint8)
    scatter_runs(out, starts, widths, digits64)
    scatter_runs(out, starts + widths + 1, counts, numbers)
    out[starts + widths] = ord(" ")
    out[starts + lines - 1] = ord("\n")
    return out.tobytes()


def in_rank_order(ranks: Ranks) -> tuple[list[bytes], np.ndarray]:
    """The tokens in rank order and their ranks (a rank file read in order is in order already)."""
    import numpy as np

    tokens = list(ranks)
    values = np.fromiter(ranks.values(), dtype=np.int64, count=len(tokens))
    if bool(np.all(values[1:] > values[:-1])):
        return tokens, values
    order = np.argsort(values, kind="stable")
    return [tokens[i] for i in order.tolist()], values[order]


def scatter_runs(out: np.ndarray, starts: np.ndarray, lengths: np.ndarray, data: np.ndarray) -> None:
    """Write the runs of ``data`` (``lengths`` long, one after another) at ``starts`` in ``out``."""
    import numpy as np

    if len(data):
        out[np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(len(data))] = data


def decimal_digits(numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative integers as decimal ASCII, one after another, and each one's length."""
    import numpy as np

    counts = np.maximum(np.searchsorted(10 ** np.arange(19, dtype=np.int64), numbers, side="right"), 1)
    return np.frombuffer("".join(map(str, numbers.tolist())).encode("ascii"), np.uint8), counts
