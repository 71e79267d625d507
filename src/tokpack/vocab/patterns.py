"""Pre-tokenizer patterns: the regexes that cut text into pieces BPE never merges across."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from os import PathLike

#: GPT-2's pattern, as tiktoken writes it (the default of a rank file or a GPT-2 pair, which
#: carry no pattern of their own).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

#: GPT-4's (``cl100k_base``) pattern: case-insensitive contractions, digits in groups of three.
#: tiktoken writes the digit groups ``\p{N}{1,3}+``; here they are ``\p{N}{1,3}``, which cuts
#: the same in tiktoken but means the same in Hugging Face's Oniguruma too, where ``{1,3}+`` is
#: "one or more groups of one to three" rather than possessive.
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

#: tiktoken's own spelling of ``cl100k_base``'s pattern: digit groups ``{1,3}+`` (possessive),
#: which cuts as :data:`GPT4_PATTERN`'s ``{1,3}`` since nothing follows the group.
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

#: o200k_base's pattern, as tiktoken writes it (its vocabulary: :mod:`tokpack.vocab.published`).
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

#: Digits in groups of up to three, as GPT-4 does, but written ``{1,3}`` rather than GPT-4's
#: possessive ``{1,3}+``: Hugging Face's regex engine (Oniguruma) reads ``{1,3}+`` as "one or
#: more groups of one to three", so the same pattern would cut digits differently in the two
#: libraries. Nothing follows the group inside its alternative, so greedy equals possessive.
_TAIL = r""" ?\p{N}{1,3}|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""

#: What may lead a piece: newlines, then spaces or tabs (indentation), as one prefix.
_LEAD = r"""[\r\n]*+[ \t]*+"""

#: The word pattern tuned on the Polish split (see EXPERIMENTS.md): GPT-4's, except that a
#: letter or punctuation run may be led by newlines and indentation and a digit group by a space.
POLISH_PATTERN = _LEAD + r"""[^\r\n\p{L}\p{N}]?+\p{L}++|""" + _LEAD + r"""[^\s\p{L}\p{N}]++[\r\n]*+|""" + _TAIL

#: The phrase pattern of the second stage: like :data:`POLISH_PATTERN`, but a letter piece goes on
#: over further words, each led by one space and optionally by one of ``,.:;`` before it (and by
#: one opening mark such as ``(`` or ``"`` after it), so phrases such as `` nie jest`` or
#: ``, a następnie`` can become single tokens.
POLISH_PHRASE_PATTERN = (
    _LEAD + r"""[^\r\n\p{L}\p{N}]?+\p{L}++(?:[,.:;]?+ [^\r\n\p{L}\p{N}]?+\p{L}++)*+|"""
    + _LEAD + r"""[^\s\p{L}\p{N}]++[\r\n]*+|""" + _TAIL
)


#: The pattern every trainer uses unless told otherwise (``prepare``, ``tokenizer train``, ``bpe
#: train``, their APIs): GPT-4's. It is published and read alike by tiktoken and Hugging Face,
#: tuned on no corpus of this project, and cuts better than GPT-2's: digits in groups of three (no
#: token for one long number), case-insensitive contractions, newlines kept apart from words; and
#: tokpack's exact trainer splits it in compiled code.
DEFAULT_PATTERN = GPT4_PATTERN

#: The one special token of a byte-level vocabulary; corpus text never produces it.
END_OF_TEXT = "<|endoftext|>"


#: Patterns known by name on the command line.
NAMED_PATTERNS = {
    "gpt2": GPT2_PATTERN,
    "gpt4": GPT4_PATTERN,
    "polish": POLISH_PATTERN,
    "polish-phrase": POLISH_PHRASE_PATTERN,
}


#: The patterns tokpack knows by meaning, each in the one spelling it records (see
#: :func:`canonical_pattern`): the named ones and the published vocabularies'.
KNOWN_PATTERNS = (*NAMED_PATTERNS.values(), O200K_PATTERN)


def _alternatives(pattern: str) -> list[str]:
    r"""The top-level alternatives of ``pattern``: split at each ``|`` outside groups, classes and escapes.

    >>> _alternatives(r"a|(?:b|c)|[|]|\||[]|]")
    ['a', '(?:b|c)', '[|]', '\\|', '[]|]']
    """
    found, start, depth, in_class, index = [], 0, 0, False, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern[index + 1 : index + 2] == "^":
                index += 1
            if pattern[index + 1 : index + 2] == "]":  # a leading ] is a member, not the end
                index += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            found.append(pattern[start:index])
            start = index + 1
        index += 1
    return [*found, pattern[start:]]


def _ends_possessive(alternative: str) -> bool:
    r"""Whether ``alternative`` ends with a possessive quantifier (``++``, ``*+``, ``?+``, ``{m,n}+``).

    >>> _ends_possessive(r"\p{L}++"), _ends_possessive(r"\++"), _ends_possessive(r"\\++"), _ends_possessive("a+")
    (True, False, True, False)
    >>> _ends_possessive(r"\d{1,3}+"), _ends_possessive(r"\p{N}+"), _ends_possessive(r"\x{41}+")  # braces of an escape
    (True, False, False)
    """
    if len(alternative) < 2 or alternative[-1] != "+" or alternative[-2] not in "+*?}":
        return False
    if alternative[-2] == "}":
        # ``{m}``, ``{m,}``, ``{m,n}``, ``{,n}`` are quantifiers; ``\p{N}``, ``\x{41}``, ``\N{…}`` close
        # an escape, and the ``+`` after them is a greedy quantifier of their own.
        braces = re.search(r"\{(?:\d+(?:,\d*)?|,\d+)\}\+$", alternative)
        if braces is None:
            return False
        opening = alternative[: braces.start()]
        escape = len(opening) >= 2 and opening[-1] in "pPxNo" and opening[-2] == "\\"  # the escapes that take braces
        return not (escape and (len(opening[:-1]) - len(opening[:-1].rstrip("\\"))) % 2 == 1)
    before = alternative[:-2]
    return (len(before) - len(before.rstrip("\\"))) % 2 == 0  # an escaped mark is a literal, quantified greedily


def _meaning(pattern: str) -> str:
    r"""``pattern`` with every possessive quantifier that ends a top-level alternative made greedy.

    Nothing follows such a quantifier, so the first way the greedy one tries is the match: both
    take the same text (in ``regex`` and in tiktoken's engine), and spellings that differ only
    there mean the same. (Hugging Face's Oniguruma reads ``{1,3}+`` otherwise, as "one or more
    groups of one to three", which is why tokpack records the greedy spelling.)

    >>> _meaning(r"\p{N}{1,3}+| ?[^\s]++[\r\n]*+|\s++$")
    '\\p{N}{1,3}| ?[^\\s]++[\\r\\n]*|\\s++$'
    """
    return "|".join(alternative[:-1] if _ends_possessive(alternative) else alternative
                    for alternative in _alternatives(pattern))


def canonical_pattern(pattern: str) -> str:
    r"""The spelling tokpack records for what ``pattern`` means: a known pattern
    (:data:`KNOWN_PATTERNS`) when ``pattern`` is one of its equivalent spellings, else ``pattern``
    itself. Spellings are equivalent here when they differ only in possessive quantifiers that
    end an alternative (tiktoken writes cl100k's digit groups ``\p{N}{1,3}+``, tokpack
    ``\p{N}{1,3}``); a spelling that cuts some text differently is never taken for a known one.

    >>> canonical_pattern(CL100K_PATTERN) == GPT4_PATTERN
    True
    >>> canonical_pattern(r"\w+|\s")
    '\\w+|\\s'
    """
    meaning = _meaning(pattern)
    return next((known for known in KNOWN_PATTERNS if _meaning(known) == meaning), pattern)


def same_meaning(first: str, second: str) -> bool:
    """Whether two pattern spellings mean the same by :func:`canonical_pattern`'s rule.

    >>> same_meaning(CL100K_PATTERN, GPT4_PATTERN), same_meaning(GPT2_PATTERN, GPT4_PATTERN)
    (True, False)
    """
    return first == second or _meaning(first) == _meaning(second)


def resolve_pattern(name_or_regex: str, where: str | PathLike[str] | None = None) -> str:
    """A named pattern (``gpt2``, ``gpt4``, ``polish``, ``polish-phrase``) or the regex itself.

    Every public entry point that takes a pattern (the CLI's ``--pattern`` and the APIs'
    ``pattern=``) reads it through here, so a name means the same everywhere; a full regex comes
    back unchanged.

    Raises:
        InputError: the regex does not compile.

    >>> resolve_pattern("gpt2") == GPT2_PATTERN
    True
    """
    if isinstance(name_or_regex, str):
        name_or_regex = NAMED_PATTERNS.get(name_or_regex, name_or_regex)
    return check_pattern(name_or_regex, where)


#: The patterns written in this module: each compiles and matches no empty string (a test holds
#: it), so :func:`check_pattern` passes them without loading the regex engine.
_WRITTEN_HERE = frozenset({GPT2_PATTERN, GPT4_PATTERN, CL100K_PATTERN, O200K_PATTERN, POLISH_PATTERN,
                           POLISH_PHRASE_PATTERN})


def check_pattern(pattern: str, where: str | PathLike[str] | None = None) -> str:
    """``pattern`` if it compiles, in the `regex` module and in Hugging Face's engine (a
    vocabulary's ``tokenizer.json`` carries it), and cannot match the empty string (an empty piece
    makes no token, and tiktoken's engine panics on one).

    >>> check_pattern("x*")
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: pre-tokenizer pattern 'x*' matches the empty string; every piece must hold at least one character
    """
    from tokpack.errors import InputError

    if not isinstance(pattern, str):
        raise InputError(f"pre-tokenizer pattern must be a string, got {type(pattern).__name__}", where=where)
    if pattern in _WRITTEN_HERE:
        return pattern
    import regex

    try:
        compiled = regex.compile(pattern)
    except (regex.error, RecursionError) as error:
        raise InputError(f"pre-tokenizer pattern '{pattern}' does not compile ({error})", where=where,
                         fix="correct the regex (the `regex` module's syntax), or give one of the names "
                             f"{', '.join(sorted(NAMED_PATTERNS))}") from None
    if compiled.match("") is not None:
        raise InputError(f"pre-tokenizer pattern '{pattern}' matches the empty string; every piece must hold "
                         "at least one character", where=where)
    from tokenizers import Regex

    try:  # a vocabulary's tokenizer.json carries the pattern: Hugging Face must compile it too
        Regex(pattern)
    except Exception as error:  # noqa: BLE001 - tokenizers raises a bare Exception for Oniguruma's errors
        raise InputError(f"pre-tokenizer pattern '{pattern}' does not compile in Hugging Face's regex engine "
                         f"({error}), which a vocabulary's tokenizer.json needs", where=where,
                         fix="write it in syntax both the `regex` module and Oniguruma accept (e.g. [\\s\\S] "
                             "for (?s).)") from None
    return pattern


def check_covers(pattern: str, text: str, where: str | PathLike[str] | None = None,
                 document: str = "the first document") -> None:
    """Refuse a pattern that skips part of ``text`` (``document``): BPE encodes only the pattern's
    matches, so anything between them would vanish from the ids without a word.

    >>> check_covers(r"\\d+", "12 apples")
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: pre-tokenizer pattern '\\d+' skips ' apples' at character 2 of the first document; use a pattern that matches every character, e.g. a named one: gpt4 (the default), gpt2, polish or polish-phrase
    """
    import regex

    from tokpack.errors import InputError

    position, gap_end = 0, len(text)
    for match in regex.finditer(pattern, text):
        if match.start() != position:  # text[position:match.start()] is in no piece
            gap_end = match.start()
            break
        position = match.end()
    if position == len(text):
        return
    skipped = text[position:gap_end]
    shown = repr(skipped if len(skipped) <= 40 else skipped[:37] + "...")
    raise InputError(f"pre-tokenizer pattern '{pattern}' skips {shown} at character {position} of {document}",
                     where=where,
                     fix="use a pattern that matches every character, e.g. a named one: gpt4 (the default), "
                         "gpt2, polish or polish-phrase")


def covering(texts: Iterable[str], pattern: str, where: str | PathLike[str] | None = None) -> Iterable[str]:
    """``texts``, once :func:`check_covers` passed on the first non-empty one (a trainer given a
    pattern that skips text would train on part of it); an iterator is read only as far as that
    text and handed back whole."""
    if isinstance(texts, Sequence):
        first = next((text for text in texts if isinstance(text, str) and text), None)
        if first is not None:
            check_covers(pattern, first[:65536], where)
        return texts
    iterator = iter(texts)
    seen: list[str] = []
    for text in iterator:
        seen.append(text)
        if isinstance(text, str) and text:
            check_covers(pattern, text[:65536], where)
            break
    return itertools.chain(seen, iterator)
