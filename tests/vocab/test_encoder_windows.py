"""The compiled encoder's window scanner (a pattern's piece starts in 64 bytes at a time, by bit
masks) against its byte scanner, piece by piece, and against tiktoken: texts long enough to span
many windows, of the bytes the masks classify (letters, digits, spaces, tabs, line ends,
apostrophes, punctuation) mixed with what ends a window (letters, digits, spaces and marks from
U+0080 on, characters across a window's edge, contractions of letters that fold), and the
repository's real files."""

from __future__ import annotations

import gzip
from importlib import resources
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe

from tokpack.vocab.compiled import COMPILED_PATTERNS, CompiledBpe

PATTERNS = sorted(COMPILED_PATTERNS)

#: Runs the rules tell apart, ASCII first (most windows hold nothing else), then what the masks leave
#: to the byte scanner.
_UNITS = ["a", "Ab", "word", " the", "HTTPServer", "camelCase", "x" * 70, " ", "  ", "   ", " " * 70, "\t", "\t\t",
          "\n", "\n\n", "\r\n", " \n", "\n ", " \n  ", "\x0b", "\x0c", "'", "''", "'s", "'S", "'t", "'ll", "'LL", "'lx",
          "'ve", "'Re", "'d", "'m", "'x", "don't", "we'll", "1", "12", "123", "1234567", " 42", "!", "!!", ".",
          ", ", "/", "//", "-", "(", ")", "{}", "\"", "#", "=>", "...", "!\n", "!\n\n", "/\n", ")\n/", "\x00", "\x7f",
          "ż", "Żółw", "жук", "中文", "😀", "\u0301", "\xa0", "\u3000", "\u2028", "\x85", "٣", "½", "'ſ", "ǅ", "ʰ"]
TEXTS = st.lists(st.sampled_from(_UNITS), min_size=1, max_size=160).map("".join)


@pytest.fixture(scope="module")
def encoders() -> dict[str, tuple[CompiledBpe, tiktoken.Encoding]]:
    packed = resources.files("bpe_openai.data").joinpath("cl100k_base.tiktoken.gz").read_bytes()
    path = Path(__file__).parent / ".cl100k_base.tiktoken"  # (a module's own copy: load_tiktoken_bpe reads files)
    try:
        path.write_bytes(gzip.decompress(packed))
        ranks = load_tiktoken_bpe(str(path))
    finally:
        path.unlink(missing_ok=True)
    return {pattern: (CompiledBpe(ranks, pattern),
                      tiktoken.Encoding(name="oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}))
            for pattern in PATTERNS}


def _both(ours: CompiledBpe, text: str) -> tuple[list[int], list[int]]:
    with ours.cache() as cache:
        by_windows = ours.encoder.pieces(text, cache)[1]  # type: ignore[attr-defined]
        by_bytes = ours.encoder.pieces(text, cache, False)[1]  # type: ignore[attr-defined]
    return by_windows, by_bytes


@settings(max_examples=1500, deadline=None)
@given(text=TEXTS, pattern=st.sampled_from(PATTERNS))
def test_windows_cut_every_text_as_the_byte_scanner_does(
        encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]], text: str, pattern: str) -> None:
    by_windows, by_bytes = _both(encoders[pattern][0], text)
    assert by_windows == by_bytes


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, pattern=st.sampled_from(PATTERNS))
def test_windows_give_tiktokens_ids(encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]], text: str,
                                    pattern: str) -> None:
    ours, oracle = encoders[pattern]
    assert ours.encode([text])[0].tolist() == oracle.encode_ordinary(text)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_windows_cut_the_repositorys_files_as_the_byte_scanner_does(
        encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]], shared_data: Path, pattern: str) -> None:
    ours = encoders[pattern][0]
    files = sorted(p for p in shared_data.rglob("*") if p.is_file() and p.suffix in ("", ".txt", ".md", ".py", ".json"))
    texts = [p.read_text(encoding="utf-8", errors="replace")[:200_000] for p in files[:60]]
    assert sum(map(len, texts)) > 1_000_000
    for path, text in zip(files, texts):
        by_windows, by_bytes = _both(ours, text)
        assert by_windows == by_bytes, path


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_contraction_at_every_offset_of_a_window(
        encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]], pattern: str) -> None:
    # (a contraction ending on a window's last byte, or crossing it, is where a mask's shift runs out)
    ours, oracle = encoders[pattern]
    for word in ("We've", "it's", "THEY'LL", "x'd"):
        for offset in range(70):
            text = "x" * offset + " " + word + " found" + " zz" * 30
            by_windows, by_bytes = _both(ours, text)
            assert by_windows == by_bytes, (word, offset)
            assert ours.encode([text])[0].tolist() == oracle.encode_ordinary(text), (word, offset)
