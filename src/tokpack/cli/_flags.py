"""The library's messages name Python parameters; the command line says them as its own flags.

This is the one place the translation happens. A library message names a parameter in one of
three ways, and each is said as a flag when the failing command has a flag of that name:

- ``name=value``, the value a Python literal or a placeholder in capitals:
  ``on_error='skip'`` becomes ``--on-error skip``, ``manifest=PATH`` ``--manifest PATH``,
  ``separator='\\n\\n'`` ``--separator $'\\n\\n'`` (as bash spells it) and ``separator=None``
  ``no --separator``;
- an identifier with an underscore, anywhere but before a colon (``games.toml: shard_mb: ...``
  names a field of that file), before an extension (``text_field.jsonl`` is a file) or in quotes
  (``'input_ids'`` is a field of the data): ``vocab_size`` becomes ``--vocab-size``;
- the message's subject, at its very start: ``shards must be at least 1`` and
  ``separator: not valid text`` (an error's ``where=``) become ``--shards ...`` and ``--separator: ...``,
  unless the subject names a file or folder that exists (``test: invalid UTF-8`` about a file
  called ``test`` stays the file).

A one-word parameter elsewhere in a sentence stays as it is ("3 shards" is not a flag). A library
parameter whose option has another name is said as that option (:data:`OPTION_NAMES`), and one
whose flag says the opposite as that flag (:data:`SAID_AS`: ``strip_eod=False`` is ``--keep-eod``).

>>> flags = {"on_error": ("--on-error", None), "shards": ("--shards", None), "vocab_size": ("--vocab-size", None),
...          "resume": ("--resume", "--no-resume")}
>>> in_flags("shards must be at least 1, got 0; or use on_error='skip'", flags)
'--shards must be at least 1, got 0; or use --on-error skip'
>>> in_flags("vocab_size trains a vocabulary; pass resume=False to start again", flags)
'--vocab-size trains a vocabulary; pass --no-resume to start again'
>>> in_flags("the job has 3 shards", flags)
'the job has 3 shards'
>>> print(in_flags("cut with separator=None, asked for separator='\\\\n\\\\n'", {"separator": ("--separator", None)}))
cut with no --separator, asked for --separator $'\\n\\n'
>>> in_flags("games.toml: vocab_size: not a number", flags)
'games.toml: vocab_size: not a number'
>>> in_flags("import with strip_eod=False", {"keep_eod": ("--keep-eod", None)})
'import with --keep-eod'
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

#: A parameter's long flag and, for a boolean one, the flag that turns it off.
Flags = Mapping[str, "tuple[str, str | None]"]

#: Library parameters whose command-line option has another name: the library's name, then the
#: option's Python name (``train_tokenizer(allow_smaller=)`` is ``tokenizer train --allow-smaller-vocab``).
OPTION_NAMES = {
    "allow_smaller": "allow_smaller_vocab",  # grading.training.train_tokenizer
    "dataset": "out",  # engines.prepare_sharded, prepare --shards
    "format": "fmt",  # store.exporting.export
    "num_merges": "merges",  # report.explorer.explorer_page
    "processes": "workers",  # engines.prepare_sharded
}

#: Library parameters said on the command line by a flag of another name whose meaning is the
#: parameter's negation: the flag's Python name (``strip_eod=False`` is ``--keep-eod``).
SAID_AS = {"strip_eod": "keep_eod"}

# Not inside a path or a URL (``data/rank=3/``, ``data\rank=3``, ``?split=train``) nor in quotes
# (``no field 'rank=3'``): a key there is part of a name or of the user's data.
_ASSIGNED = re.compile(r"(?<![\w./\\?&'\"-])([a-z][a-z0-9_]*)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s,;:)]*)")
# A value said unquoted: a placeholder in capitals (``PATH``); anything else not a Python literal
# (``rank=3/games.parquet``, ``rank=3.parquet``) is a name that holds an ``=``, kept as written.
_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")
# A name followed by a colon is a field of a file (``tokpack-chess.toml: shard_mb: ...``), not a
# parameter; one followed by an extension is a file's name (``text_field.jsonl``), one in quotes a
# field or column of the user's data (``no string field 'vocab_size'``).
_UNDERSCORED = re.compile(r"(?<![\w./\\='\"-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w/\\=:-]|\.\w)")
_NAMED = re.compile(f"{_ASSIGNED.pattern}|{_UNDERSCORED.pattern}")
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
    if value is None:
        return f"no {flag}"
    if isinstance(value, str) and not value.isprintable():  # a blank line, a tab: bash's $'...' spells it
        return f"{flag} ${value!r}".replace('"', "'") if "'" not in value else f"{flag} {shlex.quote(value)}"
    return f"{flag} {shlex.quote(str(value))}"


def _said_value(text: str) -> bool:
    """Whether ``text`` is a value a message says (empty, a Python literal or a placeholder)."""
    if text == "" or _PLACEHOLDER.fullmatch(text):
        return True
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False
    return True


def in_flags(message: str, flags: Flags) -> str:
    """``message`` with the parameters it names said as the flags in ``flags``."""

    def flag(name: str) -> tuple[str, str | None] | None:
        return flags.get(name) or flags.get(OPTION_NAMES.get(name, ""))

    def assigned(match: re.Match[str]) -> str:
        opposite = flags.get(SAID_AS.get(match.group(1), ""))
        if opposite is not None and match.group(2) in ("True", "False"):
            return _value(*opposite, str(match.group(2) == "False"))
        found = flag(match.group(1))
        return match.group(0) if found is None or not _said_value(match.group(2)) else _value(*found, match.group(2))

    def bare(match: re.Match[str]) -> str:
        name = match.group(match.lastindex or 1)
        found = flag(name)
        return name if found is None else found[0]

    def subject(match: re.Match[str]) -> str:
        # A subject naming a file or folder here is that path (a corpus called ``test``).
        return match.group(1) if os.path.lexists(match.group(1)) else bare(match)

    def named(match: re.Match[str]) -> str:
        return assigned(match) if match.group(1) is not None else bare(match)

    # One pass, so a value just said (``text_field='vocab_size'``) is not read again as a name.
    message = _NAMED.sub(named, message)
    return _SUBJECT.sub(subject, message, count=1)
