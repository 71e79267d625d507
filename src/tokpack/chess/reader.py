"""A fast streaming PGN reader: compressed inputs, chunks cut into games, tags and SAN read by compiled code.

:func:`open_pgn` opens ``.pgn``, ``.pgn.zst``, ``.pgn.bz2``, ``.pgn.gz`` (recognised by their
magic bytes) or ``-`` (standard input) as one decompressed byte stream; :func:`pgn_chunks` cuts
it into text chunks that end where a game ends, so memory is flat in the file's size.

A chunk's games are read together (:func:`tokpack.chess.pgn.chunk_games` puts the steps in
order), each step one pass of compiled code over the whole chunk:

- :func:`cut_games`: a game is a paragraph of tag lines and the paragraph of movetext after it
  (blank lines separate paragraphs; a comment may span them). :func:`cut_games_python` is the
  same cut in plain Python, kept as its specification.
- :func:`read_tags`: the tag values a conversion keeps, and which games are surely usable; a game
  whose tag lines or values it cannot vouch for is read by :func:`read_headers` (python-chess's
  tag expression, :data:`TAG`) and judged in Python.
- :func:`resolve_games`: the movetexts scanned as one byte string (:func:`main_line_words`, which
  drops comments and variations, codes the main-line words and, if asked, reads each move's
  ``[%clk]``), every game's SAN moves resolved together by :func:`tokpack.chess._resolve.resolve_san`.

Each step replaced Python per game (regular expressions, a dict of tags, a loop per paragraph);
together they took Lichess-style reading from about 20x python-chess to the figures in
BENCHMARKS.md (issue 15). Whatever that fast path does not take on exactly (a ``;`` comment, an
``%`` escape, a variation before the first move, a null move, an illegal or ambiguous move) is
read by python-chess (``chess.pgn.read_game``), so every game's moves are python-chess's main line.

Two differences from python-chess on broken input are deliberate: a paragraph of tags with no
moves is a game of its own (``header_only``), not tags added to the next game; and a comment that
is never closed ends at the next game's tags (``unreadable_movetext``) instead of swallowing the
rest of the file.
"""

from __future__ import annotations

import bz2
import gzip
import io
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np

from tokpack.chess._resolve import ASK, MANY_MOVES, SEPARATOR, SanCodes, resolve_san
from tokpack.errors import InputError

#: Bytes read (decompressed) per chunk; a chunk grows until it ends at a game's start. Reading a
#: chunk (its text, its code points, the scanners' arrays) peaks at several times its size (13
#: times with the Python cutter and tag dicts: 218 MiB for 16 MiB, 54 MiB for 4 MiB of Lichess-style
#: games, 2,900 of them), and that spike sets the converter's memory; 2,900 games are still a
#: large lockstep batch.
CHUNK_BYTES = 4 << 20
#: What cutting finds wrong with a game: (skip reason, detail).
HEADER_ONLY = ("header_only", "tags with no moves")
COMMENT_LEFT_OPEN = ("unreadable_movetext", "a comment '{' is never closed")
_PROBLEMS = (None, HEADER_ONLY, COMMENT_LEFT_OPEN)  # by the compiled cutter's codes
_MAGIC = {b"\x28\xb5\x2f\xfd": "zstd", b"\x1f\x8b": "gzip", b"BZh": "bz2"}

TAG = re.compile(r'^\[([A-Za-z0-9][A-Za-z0-9_+#=:-]*)\s+"([^\r\n]*)"\][^\S\n]*$', re.MULTILINE)  # python-chess's, per line
_TAG_LINES = re.compile(r"(?:[\[%;][^\n]*(?:\n|\Z))*")
_PARAGRAPHS = re.compile(r"(\n(?:[^\S\n]*\n)+)")
COMMENT = re.compile(r"\{[^}]*\}")
# Left to right, whichever starts first: a brace comment (its '}' may be missing), a ';' comment to
# the end of its line, a '%' escape line; so a '{' inside a ';' comment opens nothing, as in PGN.
_COMMENTS = re.compile(r"\{[^}]*\}?|;[^\n]*|^%[^\n]*", re.MULTILINE)
_VARIATION = re.compile(r"\([^()]*\)")
# python-chess's MOVETEXT_REGEX with only the move alternatives captured: the same tokens, in order.
_TOKENS = re.compile(r"""([NBKRQ]?[a-h]?[1-8]?[\-x]?[a-h][1-8](?:=?[nbrqkNBRQK])?|[PNBRQK]?@[a-h][1-8]|--|Z0|0000|@@@@
    |O-O(?:-O)?|0-0(?:-0)?)|\$[0-9]+|\(|\)|\*|1-0|0-1|1/2-1/2|[\?!]{1,2}""", re.VERBOSE)
_CLOCK_TOKENS = re.compile(r"""([NBKRQ]?[a-h]?[1-8]?[\-x]?[a-h][1-8](?:=?[nbrqkNBRQK])?|[PNBRQK]?@[a-h][1-8]|--|Z0|0000|@@@@
    |O-O(?:-O)?|0-0(?:-0)?)|\{([^}]*)\}|\$[0-9]+|\(|\)|\*|1-0|0-1|1/2-1/2|[\?!]{1,2}""", re.VERBOSE)
_CLOCK = re.compile(r"\[%clk\s(\d+):(\d+):(\d+(?:\.\d*)?)\]")


def open_pgn(path: Path | str) -> tuple[BinaryIO, BinaryIO]:
    """One file (or ``-``, standard input) as a stream of decompressed bytes, and the raw file under it.

    Raises:
        InputError: the file cannot be opened, or is not a regular file.
    """
    if str(path) == "-":
        raw: BinaryIO = sys.stdin.buffer
    else:
        path = Path(path)
        if not path.is_file():
            raise InputError(path, "not a file")
        try:
            raw = open(path, "rb")  # noqa: SIM115 - returned to the caller
        except OSError as error:
            raise InputError(path, error.strerror or "cannot be read") from None
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type,type-var]
    head = buffered.peek(4)[:4]
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            if kind == "zstd":
                import zstandard

                return zstandard.ZstdDecompressor().stream_reader(buffered, read_across_frames=True), raw  # type: ignore[return-value]
            if kind == "gzip":
                return gzip.GzipFile(fileobj=buffered), raw  # type: ignore[return-value]
            return bz2.BZ2File(buffered), raw  # type: ignore[return-value]
    return buffered, raw


def pgn_chunks(stream: BinaryIO, where: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, bytes)`` pieces of a decompressed stream, each ending just before a game's tags.

    Raises:
        InputError: the compressed stream is corrupt or truncated.
    """
    offset, pending = 0, b""
    while True:
        try:
            block = stream.read(chunk_bytes)
        except (OSError, EOFError, ValueError) as error:  # zstd, gzip and bz2 errors
            raise InputError(where, f"byte {offset + len(pending)} of the decompressed text: cannot be read ({error})") from None
        except Exception as error:  # zstandard.ZstdError is not an OSError
            if type(error).__module__.startswith("zstandard"):
                raise InputError(where, f"not a readable zstd stream ({error})") from None
            raise
        if not block:
            break
        pending += block
        cut = max(pending.rfind(b"\n\n["), pending.rfind(b"\n\r\n["))
        if cut <= 0:
            continue
        cut = pending.index(b"[", cut)
        yield offset, pending[:cut]
        offset += cut
        pending = pending[cut:]
    if pending:
        yield offset, pending


@dataclass
class Game:
    """One game's text as the reader cut it: where it starts, its tags and its movetext."""

    offset: int
    tags: str
    movetext: str
    problem: tuple[str, str] | None = None  # (skip reason, detail) found while cutting


def cut_games(text: str, offset: int) -> list[Game]:
    """The games of a chunk of text (line ends ``\\n``, ``\\r\\n`` or ``\\r``), with byte offsets.

    Compiled (:func:`tokpack.chess._cut_compiled.cut_spans`); :func:`cut_games_python` is the
    same cut written plainly, and the tests hold the two equal.
    """
    from tokpack.chess._cut_compiled import cut_spans

    text, offset = _normalise(text, offset)
    whole = "\n" + text
    if whole.isascii():
        points = np.frombuffer(whole.encode("ascii"), np.uint8)
    else:
        points = np.frombuffer(whole.encode("utf-32-le", "surrogatepass"), np.uint32)
    tag_start, tag_end, move_start, move_end, offsets, problems = cut_spans(points, offset).tolist()
    return [Game(at, whole[ts:te], whole[ms:me], _PROBLEMS[problem])
            for at, ts, te, ms, me, problem in zip(offsets, tag_start, tag_end, move_start, move_end, problems,
                                                   strict=True)]


def _normalise(text: str, offset: int) -> tuple[str, int]:
    """Line ends made ``\\n`` and a byte-order mark dropped (its 3 bytes added to ``offset``)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        # Offsets past this point are approximate by the \r removed (only reports use them).
    if text.startswith("\ufeff"):
        text, offset = text[1:], offset + 3
    return text, offset


def cut_games_python(text: str, offset: int) -> list[Game]:
    """:func:`cut_games` in plain Python: the specification of the compiled cut, kept for the tests."""
    text, offset = _normalise(text, offset)
    parts = _PARAGRAPHS.split("\n" + text)  # the "\n" added makes leading blank lines a separator
    position = -1  # character position of parts[i] in text
    if not parts[0]:
        position += len(parts[1])
        parts = parts[2:]
    else:
        parts[0] = parts[0][1:]
        position += 1
    ascii_text = text.isascii()
    games: list[Game] = []
    i = 0

    counted = [0, offset]  # a character position and its byte offset: games come in order

    def at(pos: int) -> int:
        if ascii_text:
            return offset + pos
        counted[1] += len(text[counted[0]:pos].encode("utf-8", "surrogateescape"))
        counted[0] = pos
        return counted[1]

    while i < len(parts):
        paragraph = parts[i]
        start = position
        position += len(paragraph) + (len(parts[i + 1]) if i + 1 < len(parts) else 0)
        if not paragraph or paragraph.isspace() or paragraph.startswith(("%", ";")) and all(line.startswith(("%", ";")) for line in paragraph.split("\n")):
            i += 2
            continue
        tags, movetext = _split_tags(paragraph)
        i += 2
        problem = None
        if tags and not movetext:
            separator = parts[i - 1] if i - 1 < len(parts) else ""
            if i < len(parts) and separator.count("\n") == 2 and not parts[i].startswith("["):
                movetext = parts[i]
                position += len(parts[i]) + (len(parts[i + 1]) if i + 1 < len(parts) else 0)
                i += 2
            else:
                problem = HEADER_ONLY
        while _comment_left_open(movetext):
            if i < len(parts) and not parts[i].startswith("["):
                movetext += parts[i - 1] + parts[i]
                position += len(parts[i]) + (len(parts[i + 1]) if i + 1 < len(parts) else 0)
                i += 2
            else:
                problem = COMMENT_LEFT_OPEN
                break
        games.append(Game(at(start), tags, movetext, problem))
    return games


def _comment_left_open(movetext: str) -> bool:
    """Whether ``movetext`` ends inside a brace comment (a '{' never closed).

    >>> _comment_left_open("1. e4 { best"), _comment_left_open("1. e4 ; see {this\\n1... e5")
    (True, False)
    """
    if ";" not in movetext and "\n%" not in movetext and not movetext.startswith("%"):
        # The common case, Lichess's "{ [%clk 0:03:00] }" included: the last '{' decides.
        return movetext.rfind("{") > movetext.rfind("}")
    last = None
    for last in _COMMENTS.finditer(movetext):
        pass
    return last is not None and last.group().startswith("{") and not last.group().endswith("}")


def _split_tags(paragraph: str) -> tuple[str, str]:
    """A paragraph's leading tag lines (and escapes among them), and the movetext after them."""
    if not paragraph.startswith(("[", "%", ";")):
        return "", paragraph
    end = _TAG_LINES.match(paragraph).end()  # type: ignore[union-attr]
    return paragraph[:end], paragraph[end:]


def bad_tag_line(tags: str) -> str:
    """The first line starting with ``[`` that is not a well-formed tag (cut to 60 characters), or ``""``."""
    for line in tags.split("\n"):
        if line.startswith("[") and not TAG.match(line):
            return line.strip()[:60]
    return ""


def read_headers(game: Game) -> tuple[dict[str, str], str]:
    """A game's tags as python-chess reads them, and its first malformed tag line (or ``""``)."""
    pairs = TAG.findall(game.tags)
    bad = ""
    if game.tags.count("\n[") + game.tags.startswith("[") != len(pairs):
        bad = bad_tag_line(game.tags)
    return dict(pairs), bad


@dataclass
class Tags:
    """The tags of :data:`tokpack.chess._tags_compiled.TAGS` of a chunk's games, as spans of ``text``.

    ``plain[g]``: game ``g``'s tag lines were read without doubt, so its spans are the tag
    expression's (:data:`TAG`) reading; otherwise :func:`read_headers` must read them. ``judged[g]``:
    a plain game surely usable, its date from tag ``date_tag[g]`` and its ratings ``white_elo[g]``,
    ``black_elo[g]`` (see :func:`tokpack.chess._tags_compiled.judge_plain`).
    """

    text: str
    starts: np.ndarray
    ends: np.ndarray
    plain: np.ndarray
    judged: np.ndarray
    date_tag: np.ndarray
    white_elo: np.ndarray
    black_elo: np.ndarray

    def dates(self) -> list[str | None]:
        """Every judged game's date (its ``UTCDate``, else its ``Date``); None for the others."""
        rows = np.arange(len(self.judged))
        starts, ends = self.starts[rows, self.date_tag].tolist(), self.ends[rows, self.date_tag].tolist()
        text = self.text
        return [text[s:e] if judged else None for s, e, judged in zip(starts, ends, self.judged.tolist(), strict=True)]

    def column(self, tag: int) -> list[str | None]:
        """Every game's value of tag number ``tag`` (None where absent; meaningful for plain games)."""
        text = self.text
        return [text[s:e] if s >= 0 else None for s, e in zip(self.starts[:, tag].tolist(), self.ends[:, tag].tolist(), strict=True)]


def read_tags(games: list[Game]) -> Tags:
    """The tags of every game, read and judged together by compiled code (see :class:`Tags`)."""
    from tokpack.chess._tags_compiled import TAGS, judge_plain, scan_tags

    text = "\n".join(game.tags for game in games) + "\n"  # each game's tag lines end at a line end
    bounds = np.zeros(len(games) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(game.tags) + 1 for game in games), np.int64, len(games)), out=bounds[1:])
    # Code points, so a span is a slice of the text itself (one byte each for ASCII, the usual case).
    if text.isascii():
        points = np.frombuffer(text.encode("ascii"), np.uint8)
    else:
        points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    n = len(games)
    starts, ends = np.empty((n, len(TAGS)), dtype=np.int64), np.empty((n, len(TAGS)), dtype=np.int64)
    plain, judged = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.bool_)
    date_tag, white_elo, black_elo = (np.zeros(n, dtype=np.int64) for _ in range(3))
    if n:
        scan_tags(points, bounds, starts, ends, plain)
        judge_plain(points, starts, ends, plain, judged, date_tag, white_elo, black_elo)
    return Tags(text, starts, ends, plain, judged, date_tag, white_elo, black_elo)


class MainLine(NamedTuple):
    """A game's main line: UCI moves separated by spaces, their number, and each move's clock (seconds)."""

    uci: str
    plies: int
    clocks: list[float | None] | None = None  # None: not asked for, or Python must read them


def resolve_games(movetexts: list[str], codes: SanCodes, *, clocks: bool = False) -> list[MainLine | None]:
    """The main line of each game's movetext (comments, variations and all), or ``None`` where
    python-chess must decide (see :func:`main_line_words`, and an unusual, illegal or ambiguous move).

    All games are one byte string, scanned once by compiled code; each word's code comes from
    ``codes`` only where the scanner leaves it (``ASK``). With ``clocks``, the scanner also reads
    each move's ``[%clk]`` (:func:`tokpack.chess._resolve_compiled.clock_in`); a game whose clocks it
    leaves in doubt gets ``clocks=None``, for :func:`clocks_of` to read.
    """
    from tokpack.chess._resolve_compiled import uci_text

    if not movetexts:
        return []
    words, refused, clock_values, clock_doubt = main_line_words(movetexts, codes, clocks=clocks)
    game_of_word = np.cumsum(words == SEPARATOR)
    is_move = words >= 0
    counts = np.bincount(game_of_word[is_move], minlength=len(movetexts))
    many = np.bincount(game_of_word[words == MANY_MOVES], minlength=len(movetexts)) > 0
    san = words[is_move]
    start, end, promo, resolved = resolve_san(san, counts)
    resolved &= ~many & ~refused
    out = np.empty(6 * len(san), dtype=np.uint8)
    bounds = np.empty(len(movetexts) + 1, dtype=np.int64)
    uci_text(start, end, promo, counts, out, bounds)
    ends = bounds.tolist()
    text = out[:ends[-1]].tobytes().decode("ascii")
    lines = [MainLine(text[ends[g]:ends[g + 1]], n) if ok else None
             for g, (ok, n) in enumerate(zip(resolved.tolist(), counts.tolist(), strict=True))]
    if clocks:
        move_clocks = clock_values[is_move].tolist()
        first = np.concatenate([[0], np.cumsum(counts)]).tolist()
        for g in np.flatnonzero(resolved & ~clock_doubt).tolist():
            game_clocks = [None if value != value else value for value in move_clocks[first[g]:first[g + 1]]]  # NaN: none
            lines[g] = lines[g]._replace(clocks=game_clocks)  # type: ignore[union-attr]
    return lines


def main_line_words(movetexts: list[str], codes: SanCodes, *,
                    clocks: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The code of every main-line word of every game (``SEPARATOR`` between games), which games
    python-chess must read instead, and with ``clocks`` each word's clock (NaN for none and for
    words that are not moves) and which games' clocks Python must read (else two empty arrays).

    Comments ``{...}`` and variations ``(...)`` are dropped by the compiled scanner
    (:func:`tokpack.chess._resolve_compiled.scan_movetexts`) over the UTF-8 bytes, so non-ASCII
    comments cost nothing. Refused: a ``;`` comment, an ``%`` escape, a stray ``}`` or ``)``, a
    variation before the first move or never closed, a comment never closed, a NUL or a non-ASCII
    byte outside comments.
    """
    from tokpack.chess._resolve_compiled import scan_movetexts

    with_nul = [g for g, text in enumerate(movetexts) if "\x00" in text]  # NUL separates games below
    if with_nul:
        movetexts = ["" if "\x00" in text else text for text in movetexts]
    data = "\x00".join(movetexts).encode("utf-8", "surrogateescape")
    buffer = np.frombuffer(data, dtype=np.uint8)
    words = np.empty(len(buffer) // 2 + len(movetexts) + 1, dtype=np.int64)
    starts = np.empty_like(words)
    ends = np.empty_like(words)
    refused = np.zeros(len(movetexts), dtype=np.bool_)
    clock_values = np.empty(len(words) if clocks else 0, dtype=np.float64)
    clock_doubt = np.zeros(len(movetexts) if clocks else 0, dtype=np.bool_)
    n = scan_movetexts(buffer, words, starts, ends, refused, clock_values, clock_doubt)
    words, starts, ends = words[:n], starts[:n], ends[:n]
    refused[with_nul] = True
    for i in np.flatnonzero(words == ASK).tolist():
        words[i] = codes[data[starts[i]:ends[i]].decode("ascii")]
    return words, refused, clock_values[:n], clock_doubt


def clocks_of(movetext: str) -> list[float | None]:
    """Each main-line move's clock (seconds) from the ``[%clk h:mm:ss]`` comment after it."""
    clocks: list[float | None] = []
    for move, comment in _CLOCK_TOKENS.findall(movetext):
        if move:
            clocks.append(None)
        elif comment and clocks and clocks[-1] is None:
            found = _CLOCK.search(comment)
            if found:
                hours, minutes, seconds = found.groups()
                clocks[-1] = int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    return clocks


def clock_movetext(movetext: str) -> str:
    """Movetext without variations (comments kept), for :func:`clocks_of`."""
    text = movetext
    while "(" in text:
        hidden = COMMENT.sub(lambda m: m.group(0).replace("(", " ").replace(")", " "), text)
        reduced = _VARIATION.sub(" ", hidden)
        if reduced == hidden:
            break
        text = reduced
    return text


def python_chess_moves(game: Game) -> tuple[list[str], list[str], list[float | None]]:
    """python-chess's reading of one game: main-line UCI moves, errors, and clocks."""
    import chess.pgn

    from tokpack.chess.pgn import _Collector

    collector = chess.pgn.read_game(io.StringIO(game.tags + "\n" + game.movetext), Visitor=_Collector)  # type: ignore[arg-type]
    if collector is None:
        return [], [], []
    return collector.moves, collector.errors, collector.clocks


def new_codes() -> SanCodes:
    """An empty word table for :func:`resolve_games`."""
    return SanCodes(_TOKENS, "\x00")
