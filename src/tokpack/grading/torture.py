"""Lossless first: a built-in torture set and the round-trip check every tokenizer must pass.

A tokenizer is lossless when decoding the ids of any text gives back that text exactly. The
torture set gathers what breaks tokenizers in practice: Polish diacritics (composed and
decomposed), emoji with skin tones and ZWJ sequences, flags (regional and tag sequences), tabs,
runs of spaces, ``\\r\\n`` and lone ``\\r``, trailing newlines, NUL and other control characters,
lone combining marks, every script of ``data/other/`` (short phrases written for this set), very
long lines, and text that spells out special tokens.

:func:`check_round_trip` runs texts through a Hugging Face ``tokenizer.json`` (and, when tokpack
can read it as a byte-level vocabulary, through tiktoken with the same ranks, comparing ids) and
reports every text that does not come back, naming the first differing character.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tokpack.errors import InputError

_EMOJI = (
    "👍🏻 👍🏿 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🧑🏽‍🚀 ❤️‍🔥 🫶🏾 🇵🇱 🇺🇦 🇪🇺 🏴󠁧󠁢󠁳󠁣󠁴󠁿 #️⃣ 1️⃣ ©️ ☺︎ ☺️ 🙂\n"
)
_SCRIPTS = {
    "english": "The quick brown fox jumps over the lazy dog; it's 3 o'clock.",
    "russian": "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "ukrainian": "Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів!",
    "bulgarian": "Ах, чудна българска земьо, полюшвай цъфтящи жита.",
    "greek": "Ξεσκεπάζω τὴν ψυχοφθόρα βδελυγμία.",
    "hebrew": "עטלף אבק נס דרך מזגן שהתפוצץ כי חם.",
    "arabic": "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق.",
    "japanese": "いろはにほへと ちりぬるを わかよたれそ つねならむ、カタカナも漢字も。",
    "chinese-simplified": "我能吞下玻璃而不伤身体。简体中文，标点符号！",
    "chinese-traditional": "我能吞下玻璃而不傷身體。繁體中文，標點符號！",
    "korean": "다람쥐 헌 쳇바퀴에 타고파. 한국어 문장입니다.",
}
_SPECIAL_TOKEN_SPELLINGS = (
    "<|endoftext|>",
    "tekst<|endoftext|>dalej <|endoftext|><|endoftext|>\n",
    "<|endo ftext|> <|endoftext <|im_start|>user<|im_end|> <s></s> <unk> <pad> [CLS] [SEP] [MASK]",
)


@dataclass(frozen=True)
class TortureCase:
    """One named text of the torture set."""

    name: str
    text: str


def _cases() -> Iterator[TortureCase]:
    yield TortureCase("empty", "")
    yield TortureCase("polish diacritics", "Zażółć gęślą jaźń. ZAŻÓŁĆ GĘŚLĄ JAŹŃ! Łódź, Świętokrzyskie, źdźbło.\n")
    yield TortureCase("polish decomposed (NFD)", unicodedata.normalize("NFD", "Zażółć gęślą jaźń, Łódź."))
    yield TortureCase("reference example", "Łódź  2026\t🙂\n")
    yield TortureCase("emoji, skin tones, ZWJ, flags, keycaps", _EMOJI)
    yield TortureCase("tabs and runs of spaces", "a\tb\t\tc   d" + " " * 17 + "e\t \t \n    indented\n\t\ttabbed")
    yield TortureCase("crlf and lone cr", "linia pierwsza\r\nlinia druga\r\n\r\nstara\rmakówka\r")
    yield TortureCase("trailing newline", "koniec pliku\n")
    yield TortureCase("trailing newlines and spaces", "koniec\n\n\n   \n \t")
    yield TortureCase("only whitespace", " \n\t\r\n  \u00a0\u2003\u3000")
    yield TortureCase("nul and c0 controls", "".join(chr(c) for c in range(32)) + "\x7f" + "a\x00b\x00\x00c")
    yield TortureCase("c1 controls and format characters", "".join(chr(c) for c in range(0x80, 0xA0)) + "\u200b\u200c\u200d\u200e\u200f\u2028\u2029\ufeff\u00ad")
    yield TortureCase("lone combining marks", "\u0301 \u0328a\u0301\u0301\u0307 x\u20dd \u0301\u0302\u0303\u0304\n\u0328")
    yield TortureCase("noncharacters, private use, astral plane", "\ufffe\uffff\ue000\U000f0000\U0010fffd\U0001d11e\U0001f600\U000e0001")
    yield TortureCase("replacement character as text", "\ufffd\ufffd bajt?")
    for script, phrase in _SCRIPTS.items():
        yield TortureCase(f"script: {script}", phrase + "\n")
    yield TortureCase("mixed scripts in one line", " ".join(_SCRIPTS.values()))
    yield TortureCase("code with indentation", "def f(x):\n    if x:\n\treturn {'ą': [1, 2.5e-3, -0x1F]}  # komentarz\n")
    yield TortureCase("numbers", "1 12 123 1234 12345 3,14 2026-01-31 +48 600 123 456 1e10 ٣ ⅷ ½ ²")
    yield TortureCase("very long line of letters", "ą" * 20_000)
    yield TortureCase("very long line of words", "zażółć gęślą jaźń " * 3_000)
    yield TortureCase("very long run of spaces", "x" + " " * 30_000 + "y")
    yield TortureCase("very long run of newlines", "\n" * 10_000 + "z")
    yield TortureCase("very long line of digits", "0123456789" * 3_000)
    yield TortureCase("very long line of punctuation", "-=" * 10_000 + "!?" * 1_000)
    yield TortureCase("very long line of emoji", "👩🏽‍💻🇵🇱" * 2_000)
    for number, text in enumerate(_SPECIAL_TOKEN_SPELLINGS, start=1):
        yield TortureCase(f"special token spelled out {number}", text)


#: The built-in torture set, in a fixed order.
TORTURE_SET: tuple[TortureCase, ...] = tuple(_cases())


def first_difference(expected: str, actual: str) -> int | None:
    """The index of the first character where ``actual`` differs from ``expected``, or None.

    A prefix differs at the end of the shorter text.

    >>> first_difference("Łódź", "Łódź"), first_difference("Łódź", "Łodź"), first_difference("ab", "a")
    (None, 1, 1)
    """
    if expected == actual:  # the usual case, compared at C speed: the loop below is only for a difference
        return None
    for index, (left, right) in enumerate(zip(expected, actual)):
        if left != right:
            return index
    return None if len(expected) == len(actual) else min(len(expected), len(actual))


def _describe_char(text: str, index: int) -> str:
    if index >= len(text):
        return "end of text"
    char = text[index]
    name = unicodedata.name(char, f"<{unicodedata.category(char)}>")  # controls have no name
    return f"{char!r} U+{ord(char):04X} {name}"


def describe_difference(expected: str, actual: str) -> str | None:
    """A one-line account of the first differing character, or None when the texts are equal.

    >>> describe_difference("Łódź", "Łodź")
    "character 1: expected 'ó' U+00F3 LATIN SMALL LETTER O WITH ACUTE, got 'o' U+006F LATIN SMALL LETTER O"
    """
    index = first_difference(expected, actual)
    if index is None:
        return None
    return f"character {index}: expected {_describe_char(expected, index)}, got {_describe_char(actual, index)}"


@dataclass(frozen=True)
class RoundTripFailure:
    """A text that did not survive: which text, which engine, and where it first differs."""

    name: str
    engine: str
    detail: str


@dataclass
class RoundTripReport:
    """What :func:`check_round_trip` found."""

    texts: int = 0
    characters: int = 0
    engines: tuple[str, ...] = ()
    failures: list[RoundTripFailure] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when every text decoded to itself in every engine and the ids agreed."""
        return not self.failures


def _spells_special_token(text: str, specials: Iterable[str]) -> bool:
    return any(special in text for special in specials)


def check_round_trip(tokenizer_json: Path, texts: Iterable[TortureCase]) -> RoundTripReport:
    """Encode and decode every text with the tokenizer in ``tokenizer_json``.

    Engines: Hugging Face ``tokenizers`` (encode without added special tokens, decode keeping
    them: a spelled-out special token becomes its id and decodes back to its name) and, when
    tokpack can read the file as a byte-level vocabulary, tiktoken with the same ranks, whose
    ids must equal Hugging Face's for every text that spells no special token.

    Raises:
        InputError: the file is not a loadable ``tokenizer.json``.
    """
    from tokenizers import Tokenizer

    from tokpack.vocab.loading import load_vocabulary

    try:
        hf = Tokenizer.from_file(str(tokenizer_json))
    except Exception as error:  # tokenizers raises bare Exceptions for bad files
        raise InputError(f"not a loadable tokenizer.json ({error})", where=tokenizer_json) from None
    try:
        tiktoken_side = load_vocabulary(tokenizer_json)
    except ValueError:
        tiktoken_side = None  # not byte-level BPE: only the Hugging Face round trip applies
    specials = [token.content for token in hf.get_added_tokens_decoder().values()]
    report = RoundTripReport(engines=("tokenizers",) + (("tiktoken",) if tiktoken_side else ()))
    for case in texts:
        report.texts += 1
        report.characters += len(case.text)
        # encode_batch_fast leaves out the offsets (a third of encode's time); the ids are the same
        hf_ids = hf.encode_batch_fast([case.text], add_special_tokens=False)[0].ids
        problem = describe_difference(case.text, hf.decode(hf_ids, skip_special_tokens=False))
        if problem:
            report.failures.append(RoundTripFailure(case.name, "tokenizers", problem))
        if tiktoken_side is None:
            continue
        tt_ids = tiktoken_side.encode(case.text)
        problem = describe_difference(case.text, tiktoken_side.decode_bytes(tt_ids).decode("utf-8", "replace"))
        if problem:
            report.failures.append(RoundTripFailure(case.name, "tiktoken", problem))
        if not _spells_special_token(case.text, specials) and tt_ids != hf_ids:
            position = first_difference_ids(hf_ids, tt_ids)
            report.failures.append(
                RoundTripFailure(case.name, "ids", f"tokenizers and tiktoken ids differ from token {position}")
            )
    return report


def first_difference_ids(left: list[int], right: list[int]) -> int:
    """The index of the first differing id (the shorter length when one is a prefix)."""
    for index, (a, b) in enumerate(zip(left, right)):
        if a != b:
            return index
    return min(len(left), len(right))


def file_cases(paths: Iterable[Path]) -> Iterator[TortureCase]:
    """One case per file (named by its path), read byte for byte as strict UTF-8.

    Raises:
        InputError: a file is unreadable or not UTF-8 (see :func:`~tokpack.grading.files.read_document`).
    """
    from tokpack.grading.files import read_document

    for path in paths:
        yield TortureCase(str(path), read_document(path))


@dataclass
class StructureReport:
    """What a ``tokenizer.json`` is made of, and what makes it unfit for lossless byte-level use."""

    vocab_size: int
    summary: str
    problems: list[str]


def structure_report(tokenizer_json: Path) -> StructureReport:
    """Check that ``tokenizer_json`` is a byte-level BPE that can represent any text unchanged:
    a BPE model, no normalizer, a ``ByteLevel`` pre-tokenizer step and decoder, and all 256
    bytes in the vocabulary.

    Raises:
        InputError: not a loadable ``tokenizer.json``.
    """
    import json

    from tokenizers import Tokenizer

    from tokpack.vocab.merge_files import byte_to_unicode

    try:
        document = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
        loaded = Tokenizer.from_file(str(tokenizer_json))
    except Exception as error:  # tokenizers raises bare Exceptions for bad files
        raise InputError(f"not a loadable tokenizer.json ({error})", where=tokenizer_json) from None
    problems = []
    model = document.get("model") or {}
    if model.get("type") != "BPE":
        problems.append(f"model is {model.get('type')!r}, not BPE")
    if document.get("normalizer") is not None:
        problems.append(f"has a normalizer ({document['normalizer'].get('type')}): text may change")
    pre = document.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    if not any(step.get("type") == "ByteLevel" for step in steps):
        problems.append("no ByteLevel pre-tokenizer step")
    if (document.get("decoder") or {}).get("type") != "ByteLevel":
        problems.append("decoder is not ByteLevel")
    vocab = model.get("vocab") or {}
    missing = [byte for byte, char in byte_to_unicode().items() if char not in vocab]
    if missing:
        problems.append(f"{len(missing)} of the 256 bytes have no id (first: {missing[0]})")
    size = loaded.get_vocab_size(with_added_tokens=True)
    added = len(document.get("added_tokens") or [])
    summary = f"{size} ids ({size - added} in the model + {added} added), {256 - len(missing)} of 256 bytes, " + (
        "no normalizer" if document.get("normalizer") is None else "normalizer present"
    )
    return StructureReport(size, summary, problems)
