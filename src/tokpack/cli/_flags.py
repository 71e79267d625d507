"""The library's messages name Python parameters; the command line says them as its own flags.

This is the one place the translation happens. A library message names a parameter in one of
three ways, and each is said as a flag when the failing command has a flag of that name:

- ``name=value``, the value a Python literal or a placeholder in capitals:
  ``on_error='skip'`` becomes ``--on-error skip``, ``manifest=PATH`` ``--manifest PATH``;
- an identifier with an underscore, anywhere: ``vocab_size`` becomes ``--vocab-size``;
- the message's subject, at its very start: ``shards must be at least 1`` and
  ``separator: not valid text`` (an error's ``where=``) become ``--shards ...`` and ``--separator: ...``.

A one-word parameter elsewhere in a sentence stays as it is ("3 shards" is not a flag). A library
parameter whose flag says the opposite is in :data:`SAID_AS` (``strip_eod=False`` is ``--keep-eod``).

>>> flags = {"on_error": ("--on-error", None), "shards": ("--shards", None), "vocab_size": ("--vocab-size", None),
...          "resume": ("--resume", "--no-resume")}
>>> in_flags("shards must be at least 1, got 0; or use on_error='skip'", flags)
'--shards must be at least 1, got 0; or use --on-error skip'
>>> in_flags("vocab_size trains a vocabulary; pass resume=False to start again", flags)
'--vocab-size trains a vocabulary; pass --no-resume to start again'
>>> in_flags("the job has 3 shards", flags)
'the job has 3 shards'
>>> in_flags("import with strip_eod=False", {"keep_eod": ("--keep-eod", None)})
'import with --keep-eod'
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

#: A parameter's long flag and, for a boolean one, the flag that turns it off.
Flags = Mapping[str, "tuple[str, str | None]"]

#: Library parameters said on the command line by a flag of another name: the flag's Python name,
#: and whether its meaning is the parameter's negation (``strip_eod=False`` is ``--keep-eod``).
SAID_AS: dict[str, tuple[str, bool]] = {"strip_eod": ("keep_eod", True)}

_ASSIGNED = re.compile(r"(?<![\w.-])([a-z][a-z0-9_]*)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s,;:)]*)")
_UNDERSCORED = re.compile(r"(?<![\w./=-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w/=-])")
_SUBJECT = re.compile(r"^([a-z][a-z0-9_]*)(?=[ :])")


def flags_of(params: Iterable[Any]) -> dict[str, tuple[str, str | None]]:
    """Each click option's Python name, with its long flag and the flag that negates it."""
    found: dict[str, tuple[str, str | None]] = {}
    for param in params:
        if getattr(param, "param_type_name", None) != "option" or param.name is None:
            continue
        longs = [opt for opt in param.opts if opt.startswith("--")]
        if longs:
            negative = next((opt for opt in getattr(param, "secondary_opts", []) if opt.startswith("--")), None)
            found[param.name] = (longs[0], negative)
    return found


def _value(flag: str, negative: str | None, text: str) -> str:
    if text == "":
        return flag
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):  # a placeholder such as PATH, or a word
        return f"{flag} {text}"
    if value is True:
        return flag
    if value is False and negative is not None:
        return negative
    return f"{flag} {shlex.quote(str(value))}"


def in_flags(message: str, flags: Flags) -> str:
    """``message`` with the parameters it names said as the flags in ``flags``."""

    def assigned(match: re.Match[str]) -> str:
        name, text = match.group(1), match.group(2)
        if name in SAID_AS and SAID_AS[name][0] in flags and text in ("True", "False"):
            flag_name, negated = SAID_AS[name]
            return _value(*flags[flag_name], str((text == "True") != negated))
        if name not in flags:
            return match.group(0)
        return _value(*flags[name], text)

    def bare(match: re.Match[str]) -> str:
        name = match.group(1)
        return flags[name][0] if name in flags else name

    message = _ASSIGNED.sub(assigned, message)
    message = _UNDERSCORED.sub(bare, message)
    return _SUBJECT.sub(bare, message, count=1)
