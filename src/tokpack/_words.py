"""How messages and summaries say things: a number with its noun, singular for one; what is wrong
with JSON that does not parse.

>>> counted(1, "document"), counted(12_345, "shard"), counted(0, "input unit")
('1 document', '12,345 shards', '0 input units')
"""

from __future__ import annotations

import json


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``number`` (thousands grouped) and ``noun``, or ``plural`` (``noun + "s"`` unless given)
    for any number but one."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


__all__ = ["counted"]



#: The control characters JSON has a short escape for: what they are, and that escape.
_ESCAPES = {"\t": ("a tab", "\\t"), "\n": ("a line break", "\\n"), "\r": ("a carriage return", "\\r")}


def json_reason(error: json.JSONDecodeError) -> str:
    r"""What is wrong where ``error`` stopped, in whole words: a few of json's messages end in "at"
    (its full message adds the position), and "control character" means nothing to most users.

    >>> def reason(text):
    ...     try:
    ...         json.loads(text)
    ...     except json.JSONDecodeError as error:
    ...         return json_reason(error)
    >>> print(reason('{"a": "b' + chr(9) + 'c"}'))
    an unescaped control character (U+0009, a tab) inside a string: JSON writes it escaped, as \t or \u0009
    >>> reason('{"a": "cut short' + chr(10))
    'the line ends inside a string (its closing quote is missing: the record was cut short?)'
    >>> reason('{"a": "b'), reason('{"a": }'), reason('{"a": 1} x')
    ('a string with no closing quote', 'expecting value', 'extra data')
    """
    message, text, at = error.msg, error.doc, error.pos
    if message.startswith("Invalid control character") and at < len(text):
        character = text[at]
        if character in "\r\n" and not text[at:].strip():
            return "the line ends inside a string (its closing quote is missing: the record was cut short?)"
        name, escape = _ESCAPES.get(character, (None, None))
        code = f"\\u{ord(character):04x}"
        return (f"an unescaped control character (U+{ord(character):04X}{', ' + name if name else ''}) inside a string: "
                f"JSON writes it escaped, as {escape + ' or ' + code if escape else code}")
    if message.startswith("Unterminated string"):
        return "a string with no closing quote"
    message = message.removesuffix(" at")
    return message[:1].lower() + message[1:]
