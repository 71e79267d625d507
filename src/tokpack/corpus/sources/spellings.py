"""Finding special tokens spelled in a corpus's text, as they are or as JSON writes them."""

from __future__ import annotations

import itertools
import json
import os
import re
import warnings

from tokpack._files import FileBytes
from tokpack.corpus.sources.base import DocumentSource
from tokpack.corpus.sources.decoding import CHUNK_BYTES
from tokpack.errors import SpecialTokenInText, located


def warn_spelled_special_tokens(source: DocumentSource, tokens: list[str], stacklevel: int = 2) -> None:
    """Warn (:class:`~tokpack.errors.SpecialTokenInText`) once per special token the text of
    ``source`` spells when no separator takes it out; its caller's caller is named."""
    if source.separator is not None:
        return
    for token, (count, first) in source.spelled(sorted(tokens)).items():
        warnings.warn(SpecialTokenInText(token, count, first), stacklevel=stacklevel + 1)


def json_spellings(token: str) -> list[str]:
    r"""How JSON encoders write ``token`` inside a string: as it is, with every non-ASCII
    character escaped (Python's default), with ``<``, ``>`` and ``&`` escaped (Go's, .NET's: in
    lower or upper case hex), with ``/`` escaped (PHP's); the first is the token itself.

    >>> json_spellings("</s>")
    ['</s>', '<\\/s>', '\\u003c/s\\u003e', '\\u003C/s\\u003E', '\\u003c\\/s\\u003e', '\\u003C\\/s\\u003E']
    """
    found: list[str] = []
    for ascii_only, html, slash, upper in itertools.product((False, True), repeat=4):
        written = json.dumps(token, ensure_ascii=ascii_only)[1:-1]
        if html:
            written = written.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        if slash:
            written = written.replace("/", "\\/")
        if upper:
            written = re.sub(r"\\u([0-9a-f]{4})", lambda hexa: "\\u" + hexa[1].upper(), written)
        if written not in found:
            found.append(written)
    return found


def spelled_in(files: list[tuple[FileBytes | bytes, str]], tokens: list[str], chunk: int = CHUNK_BYTES) -> dict[str, tuple[int, str]]:
    """:meth:`DocumentSource.spelled` over files' bytes, read ``chunk`` bytes at a time; an
    occurrence across two chunks is counted once, in the chunk it starts in.

    >>> spelled_in([(b"a<|x|>b<|x|><|x", "f.txt"), (b"<|x|>", "g.txt")], ["<|x|>", "<|y|>"], chunk=4)
    {'<|x|>': (3, 'f.txt: byte 1')}
    """
    found: dict[str, tuple[int, str]] = {}
    markers = [token.encode("utf-8") for token in tokens]
    reach = max((len(marker) for marker in markers), default=1) - 1
    screen = _screen(markers)
    for data, where in files:
        counts, firsts = [0] * len(markers), [-1] * len(markers)
        for low in range(0, len(data), chunk):  # each chunk read once, every token counted in it
            window = data[low : min(low + chunk + reach, len(data))]
            if screen is not None and screen.search(window) is None:
                continue  # none of them anywhere in the window: nothing to count
            for index, marker in enumerate(markers):
                # Occurrences that start in [low, low + chunk), whole: the window runs on past it.
                end = chunk + len(marker) - 1
                here = window.count(marker, 0, end)
                counts[index] += here
                if here and firsts[index] < 0:  # (searched for only where it occurs: no second scan)
                    firsts[index] = low + window.find(marker, 0, end)
        for token, count, first in zip(tokens, counts, firsts):
            if count:
                place = located(where, "", byte=first).removesuffix(": ")
                found[token] = (found[token][0] + count, found[token][1]) if token in found else (count, place)
    return found



def _screen(markers: list[bytes]) -> re.Pattern[bytes] | None:
    """A pattern that finds any of ``markers``, where one search for it costs less than counting
    each: two or more that share a prefix of at least two bytes (``<|`` for tiktoken's special
    tokens), which ``re`` finds by a literal scan, then tries the rest of each marker only there
    (without a shared prefix it tries every marker at every byte: slower than one count each).
    A window where it finds nothing holds none of them; ``None``: count each.

    >>> _screen([b"<|a|>", b"<|b|>"]).search(b"x <|b|> y").group()
    b'<|b|>'
    >>> _screen([b"</s>", b"[PAD]"]) is None
    True
    """
    if len(markers) < 2 or len(os.path.commonprefix(markers)) < 2:
        return None
    return re.compile(b"|".join(re.escape(marker) for marker in markers))
