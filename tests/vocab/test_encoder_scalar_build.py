"""The compiled encoder's portable path: the extension built with ``TP_SCALAR_MASKS``, which leaves
out every SSE2 and SSSE3 loop (the pre-tokenizer's byte-class masks, the str writers, the UTF-8
check and character count), so it runs the C that every CPU other than x86 runs (aarch64: Apple
Silicon, Graviton). Built here once by setup.py itself, as pip builds the extension plus that one
macro, and loaded beside the installed build as a module of its own; it must give tiktoken's ids
(and the installed build's pieces) on any text, as ``str`` and as UTF-8 ``bytes``, refuse bytes that
are not UTF-8 as Python does, and write two- and three-byte text and long ASCII runs (the vector
loops' block edges) as the installed build does. Without a C compiler the build fails, and so does
this file (the suite needs the extension built: test_encoder_build.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from types import ModuleType

import pytest
import test_encoder_utf8_check as utf8_tests
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from test_encoder_unicode import BMP, LATIN1, PATTERNS, RUNS, TEXTS, ranks  # noqa: F401  (ranks: cl100k's, a fixture)

import tokpack.vocab.compiled as compiled
from tokpack.vocab.compiled import CompiledBpe
from tokpack.vocab.patterns import GPT4_PATTERN

from conftest import REPO

Encoders = dict[str, tuple[CompiledBpe, CompiledBpe, tiktoken.Encoding]]


@pytest.fixture(scope="session")
def scalar_build(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The portable build of ``tokpack.vocab._bpe``, compiled once for the file (``--dist
    loadfile`` gives it to one worker) by ``setup.py build_ext`` with ``TP_SCALAR_MASKS`` defined,
    into a temporary folder, and loaded as a module of its own (not in ``sys.modules``)."""
    where = tmp_path_factory.mktemp("scalar_build")
    build = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--define", "TP_SCALAR_MASKS",
                            "--build-lib", str(where / "lib"), "--build-temp", str(where / "temp")],
                           cwd=REPO, env={**os.environ, "TOKPACK_REQUIRE_COMPILED": "1"}, capture_output=True, text=True)
    assert build.returncode == 0, f"the portable build failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    (path,) = (where / "lib" / "tokpack" / "vocab").glob("_bpe.*")
    # (the name's last part must be the extension's own: its init function is found by it)
    spec = importlib.util.spec_from_file_location("tokpack_scalar_build._bpe", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def encoders(scalar_build: ModuleType, ranks: dict[bytes, int]) -> Encoders:
    """Each pattern's encoders of cl100k's ranks: the portable build's, the installed build's, tiktoken."""
    return {pattern: (CompiledBpe(ranks, pattern, _extension=scalar_build), CompiledBpe(ranks, pattern),
                      tiktoken.Encoding(name="oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}))
            for pattern in PATTERNS}


def _pieces(encoder: CompiledBpe, text: str | bytes) -> tuple[bytes, list[int]]:
    with encoder.cache() as cache:
        utf8, ends = encoder.encoder.pieces(text, cache)  # type: ignore[attr-defined]
    return utf8, ends


def _same(encoders: Encoders, pattern: str, text: str) -> None:
    """The portable build gives tiktoken's ids for ``text`` as str and as UTF-8 bytes, and the
    installed build's UTF-8 and pieces."""
    scalar, installed, oracle = encoders[pattern]
    utf8, ends = _pieces(scalar, text)
    assert (utf8, ends) == _pieces(installed, text)
    assert utf8 == text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    expected = oracle.encode_ordinary(text)
    as_str, as_bytes = scalar.encode([text, utf8])
    assert as_str.tolist() == expected and as_bytes.tolist() == expected


def test_the_portable_build_is_loaded_beside_the_installed_one_without_vector_code(scalar_build: ModuleType) -> None:
    assert compiled._bpe is not None and scalar_build is not compiled._bpe
    assert scalar_build.__file__ != compiled._bpe.__file__
    # no vector UTF-8 check (None: not built), and its byte-class masks, made without SSE2, agree
    # with the class table: else the window scanners would be off and the masks never run
    assert scalar_build.utf8_checks(b"abc") == (None, -1)
    assert scalar_build.WINDOWS == 1


@settings(max_examples=500, deadline=None)
@given(text=TEXTS, pattern=st.sampled_from(PATTERNS))
def test_any_text_under_every_pattern(encoders: Encoders, text: str, pattern: str) -> None:
    _same(encoders, pattern, text)


@settings(max_examples=200, deadline=None)
@given(lead=st.integers(0, 17), body=st.one_of(st.lists(st.sampled_from(LATIN1), min_size=1, max_size=70),
                                               st.lists(st.sampled_from(BMP), min_size=1, max_size=70)),
       pattern=st.sampled_from(PATTERNS))
def test_latin1_and_bmp_texts_at_every_offset(encoders: Encoders, lead: int, body: list[str], pattern: str) -> None:
    _same(encoders, pattern, "x" * lead + "".join(body))


@settings(max_examples=150, deadline=None)
@given(runs=RUNS, pattern=st.sampled_from(PATTERNS))
def test_runs_of_ascii_two_byte_and_wide_characters(encoders: Encoders, runs: list[tuple[str, int]],
                                                    pattern: str) -> None:
    text = "".join(char * count for char, count in runs)
    _same(encoders, pattern, text)
    _same(encoders, pattern, "Ż" + text)  # (a str of two bytes a character)


#: ASCII of every class the window scanners' masks tell apart, cut at every length around the
#: blocks the vector loops take (8, 16, 32 and 64 bytes), then text that ends a run of ASCII.
_ASCII = ("Hello, World's 42 CATS\tran 7/8 miles;\r\n  'll DO it\x0b\x1f~" * 4)[:200]
_TAILS = ["", "é", "ż", "中", "😀", " x", "\n", "ą 中😀 a"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_ascii_runs_of_every_length_up_to_200_then_other_text(encoders: Encoders, pattern: str) -> None:
    for length in range(len(_ASCII) + 1):
        for tail in _TAILS:
            _same(encoders, pattern, _ASCII[:length] + tail)
            _same(encoders, pattern, "a" * length + tail)


@pytest.mark.parametrize("unit", ["a", "Ż", "ж", "1", " ", "\u3000", "!", "中", "😀", "ab ", "\r\n", "'s", "é"])
def test_long_pieces_of_every_kind(encoders: Encoders, unit: str) -> None:
    for pattern in PATTERNS:
        _same(encoders, pattern, "x" + unit * (20_000 // len(unit.encode())))


@pytest.fixture(scope="module")
def utf8_encoder(scalar_build: ModuleType) -> CompiledBpe:
    """test_encoder_utf8_check.py's encoder, on the portable build."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b" a": 257, "中".encode(): 258, "ż".encode(): 259}
    return CompiledBpe(ranks, GPT4_PATTERN, _extension=scalar_build)


@settings(max_examples=600, deadline=None)
@given(fragments=st.lists(utf8_tests.FRAGMENTS, max_size=30), cut=st.integers(0, 400))
def test_any_bytes_are_refused_where_python_refuses_them(utf8_encoder: CompiledBpe, fragments: list[bytes],
                                                         cut: int) -> None:
    data = b"".join(fragments)
    utf8_tests._check(utf8_encoder, data)
    utf8_tests._check(utf8_encoder, data[: min(cut, len(data))])


@pytest.mark.parametrize("bad", utf8_tests.BAD)
def test_every_bad_sequence_at_every_offset(utf8_encoder: CompiledBpe, bad: bytes) -> None:
    utf8_tests.test_every_bad_sequence_at_every_offset_and_at_the_end(utf8_encoder, bad)


def test_long_bytes_and_str_of_every_script_and_their_characters(scalar_build: ModuleType) -> None:
    encoder = CompiledBpe({bytes([b]): b for b in range(256)}, GPT4_PATTERN, _extension=scalar_build)
    for unit in ("a", "é", "ż", "ж", "中", "😀", "a ż 中 😀\n"):
        text = "b" + unit * 5_000
        as_str, as_bytes = encoder.encode([text, text.encode()])
        assert as_bytes.tolist() == as_str.tolist() == list(text.encode())
        assert scalar_build.utf8_characters(text.encode()) == len(text)
