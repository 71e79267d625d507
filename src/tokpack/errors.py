"""Every error tokpack raises on purpose, in one hierarchy.

The command line tells a user's mistake from a bug by this hierarchy alone: a
:class:`TokpackError` (or a file-system error) is one line on stderr and exit code 2; anything
else is a bug, reported as such with exit code 1 (the traceback behind ``--debug``).

Messages name the place first, then what is wrong, then the fix where one is obvious, and a
parameter by its Python name (``text_field='body'``; the command line says it as its flag,
``--text-field body``)::

    corpus.jsonl: byte 1234: no string field 'text' (fields: body, id); use text_field='body'
    pack/tokens.npy: sha256 does not match meta.json; the pack was altered (delete it to rebuild)

Every error class below is also a :class:`ValueError`: tokpack promises ``ValueError`` for these
failures, and callers may catch it (the one warning,
:class:`SpecialTokenInText`, is a :class:`UserWarning`):

>>> issubclass(VocabularyMismatch, ValueError) and issubclass(InputError, TokpackError)
True
>>> str(InputError("invalid UTF-8", where="x.txt", byte=7))
'x.txt: byte 7: invalid UTF-8'
"""

from __future__ import annotations

from os import PathLike

__all__ = [
    "InputError",
    "InputsSkipped",
    "IntegrityError",
    "MissingExtra",
    "SpecialTokenInText",
    "TokpackError",
    "VocabularyMismatch",
    "WorkerDied",
    "located",
]


def located(
    where: str | PathLike[str] | None,
    what: str,
    *,
    byte: int | None = None,
    line: int | None = None,
    game: int | None = None,
    fix: str | None = None,
) -> str:
    """The one message style: ``path: byte N: what is wrong; fix``.

    >>> located("a.jsonl", "not JSON", line=3, fix="check the quoting")
    'a.jsonl: line 3: not JSON; check the quoting'
    >>> located(None, "block must be a positive integer")
    'block must be a positive integer'
    """
    parts = [] if where is None else [str(where)]
    for name, value in (("byte", byte), ("line", line), ("game", game)):
        if value is not None:
            parts.append(f"{name} {value:,}" if value >= 10_000 else f"{name} {value}")
    parts.append(what if fix is None else f"{what}; {fix}")
    return ": ".join(parts)


class TokpackError(Exception):
    """Base of every error tokpack raises on purpose (never a bug).

    ``what`` is what is wrong; the place (``where``: a file or an argument, then a ``byte``,
    ``line`` or ``game`` in it) and the ``fix`` are keywords, joined by :func:`located`:

    >>> str(TokpackError("no training month left", fix="lower val_fraction"))
    'no training month left; lower val_fraction'
    >>> str(InputError("not JSON", where="a.jsonl", line=3, fix="check the quoting"))
    'a.jsonl: line 3: not JSON; check the quoting'
    >>> str(IntegrityError("sha256 differs from meta.json", where="pack/tokens.npy"))
    'pack/tokens.npy: sha256 differs from meta.json'
    """

    def __init__(
        self,
        what: str,
        *,
        where: str | PathLike[str] | None = None,
        byte: int | None = None,
        line: int | None = None,
        game: int | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(located(where, what, byte=byte, line=line, game=game, fix=fix))
        # Kept apart too, so a caller can say the fix in its own terms (a command line's flags,
        # a job's task that remakes the file).
        self.what, self.fix, self.where = what, fix, where
        self.byte, self.line, self.game = byte, line, game


class InputError(TokpackError, ValueError):
    """The user's file or argument is unusable: bad UTF-8 or JSON, a missing field, an illegal
    move, an expired challenge, a bad option value."""


class IntegrityError(TokpackError, ValueError):
    """A pack, dataset, cache or remote copy does not match its own record: tampered, truncated,
    reordered, a shard missing or extra."""


class VocabularyMismatch(TokpackError, ValueError):
    """Ids were asked to meet a vocabulary other than the one that made them."""


class WorkerDied(TokpackError, RuntimeError):
    """A worker process ended without a result (killed for memory, a signal): the job stops
    with this instead of waiting forever."""


class MissingExtra(TokpackError, ImportError):
    """A feature needs an optional dependency that is not installed; the message names the extra."""


class InputsSkipped(UserWarning):
    """``on_error="skip"`` left files or records out of a pack: ``count`` of them, the first few
    named with what was wrong in ``problems``. Issued by :func:`tokpack.prepare` once the pack is
    written (its ``meta.json`` counts them as ``counts.skipped``)."""

    def __init__(self, count: int, problems: list[str]) -> None:
        self.count, self.problems = count, list(problems)
        more = ", …" if count > len(self.problems) else ""
        super().__init__(f"on_error='skip' left out {count:,} {'file or record' if count == 1 else 'files or records'}: {'; '.join(self.problems)}{more}")


class SpecialTokenInText(UserWarning):
    """The text spells a special token (``<|endoftext|>``) that no separator takes out: it is
    encoded as the characters it is made of, not as the special token's id, and the documents
    around it are one document. Issued by :func:`tokpack.prepare` with what was found."""

    def __init__(self, token: str, count: int, first: str) -> None:
        self.token, self.count, self.first = token, count, first
        times = "once" if count == 1 else f"{count:,} times"
        super().__init__(f"{first}: the text spells the special token {token!r} {times} (the first here) and no "
                         "separator takes it out, so it is encoded as its characters and documents run across it; "
                         f"if it ends documents, prepare again with separator={token!r}")
