"""``bytes`` texts of the compiled encoder: checked as UTF-8 in C, refused with the very
``UnicodeDecodeError`` Python's decoder raises (``start``, the offset prepare names; ``end``;
``reason``) on every kind of bad sequence at every offset (truncated, overlong, surrogates,
above U+10FFFF, stray continuation bytes, bytes no character starts with, at the end too), and
encoded in place to the ids of the ``str`` they decode to, among ``str`` texts in one call; ``encode_arrays``
adds a note naming the refused text's index, on either encoder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.vocab import BpeTokenizer
from tokpack.vocab.compiled import MAX_ID, CompiledBpe, utf8_characters
from tokpack.vocab.patterns import GPT2_PATTERN, GPT4_PATTERN

#: Sequences that are no character, of every kind, and characters of every length around them.
BAD = [b"\x80", b"\xbf", b"\x80\x80", b"\xc0\xaf", b"\xc1\xbf", b"\xc0", b"\xc2", b"\xc3a", b"\xdf",
       b"\xe0\x80\xaf", b"\xe0\x9f\xbf", b"\xe0\xa0", b"\xe1\x80", b"\xe2\x82", b"\xe2\x82a", b"\xe2a\x82", b"\xef\xbf",
       b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xb0\x80", b"\xed\xa0\xbd\xed\xb8\x80", b"\xed\x9f",
       b"\xf0\x80\x80\xaf", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80", b"\xf0\x9f\x98", b"\xf0\x9f", b"\xf0\x9f\x98a",
       b"\xf4\x90\x80\x80", b"\xf4\x8f\xbf", b"\xf5\x80\x80\x80", b"\xf7\xbf\xbf\xbf", b"\xf8\x88\x80\x80\x80",
       b"\xfc\x84\x80\x80\x80\x80", b"\xfe", b"\xff", b"\xff\xfe"]
GOOD = ["a", " ", "\n", "é", "ż", "\u07ff", "\u0800", "中", "\ud7ff", "\ue000", "\uffff", "😀", "\U00010000",
        "\U0010ffff"]
FRAGMENTS = st.one_of(
    st.sampled_from(BAD),
    st.sampled_from(GOOD).map(str.encode),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=40).map(str.encode),
    st.text(max_size=12).map(lambda text: text.encode("utf-8", "surrogatepass")),  # lone surrogates too
    st.binary(max_size=6),
)


@pytest.fixture(scope="module")
def encoder() -> CompiledBpe:
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b" a": 257, "中".encode(): 258, "ż".encode(): 259}
    return CompiledBpe(ranks, GPT4_PATTERN)


def _python(data: bytes) -> tuple[int, int, str] | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start, error.end, error.reason
    return None


def _check(encoder: CompiledBpe, data: bytes) -> None:
    expected = _python(data)
    # both checks the encoder's build makes, each on its own: the vector one (where the CPU has it)
    # and the scan that finds the offset
    vector, start = encoder._extension.utf8_checks(data)
    assert vector in (None, expected is None), data
    assert start == (-1 if expected is None else expected[0]), data
    if expected is None:
        as_str, as_bytes = encoder.encode([data.decode("utf-8"), data])
        assert as_bytes.tolist() == as_str.tolist()
        assert encoder._extension.utf8_characters(data) == len(data.decode("utf-8"))
        return
    with pytest.raises(UnicodeDecodeError) as caught:
        encoder.encode(["before", b"fine", data, b"\xff never reached"])
    error = caught.value
    assert (error.start, error.end, error.reason) == expected, data
    assert error.object is data and error.encoding == "utf-8"


@settings(max_examples=2000, deadline=None)
@given(fragments=st.lists(FRAGMENTS, max_size=30), cut=st.integers(0, 400))
def test_any_bytes_are_refused_where_python_refuses_them_or_encoded_as_their_text(
        encoder: CompiledBpe, fragments: list[bytes], cut: int) -> None:
    data = b"".join(fragments)
    _check(encoder, data)
    _check(encoder, data[: min(cut, len(data))])  # cut anywhere: inside a character too


@pytest.mark.parametrize("bad", BAD)
def test_every_bad_sequence_at_every_offset_and_at_the_end(encoder: CompiledBpe, bad: bytes) -> None:
    # ASCII runs are passed over 32 bytes at a time: the sequence at each offset of two blocks,
    # after ASCII or after other characters, followed by text or ending the bytes.
    for lead in range(70):
        for before in (b"x" * lead, ("ż" * lead).encode()[:lead], ("中" * lead).encode()[:lead]):
            for after in (b"", b"tail", "żółw 中".encode(), b"x" * 40):
                _check(encoder, before + bad + after)


def test_every_first_and_second_byte(encoder: CompiledBpe) -> None:
    # Each pair of bytes, then continuation bytes, ASCII or the end: every first byte's range for
    # the byte after it (E0, ED, F0, F4 narrower than the others) and every length.
    for first in range(256):
        for second in range(256):
            pair = bytes([first, second])
            for after in (b"", b"\x80\x80\x80", b"\xbfz"):
                _check(encoder, b"abc" + pair + after)


def test_a_refused_call_leaves_the_cache_usable(encoder: CompiledBpe) -> None:
    with encoder.cache() as cache:
        with pytest.raises(UnicodeDecodeError):
            encoder.encoder.encode([b"\xff"], cache)  # type: ignore[attr-defined]
        ids, _ = encoder.encoder.encode(["ab", b"ab"], cache)  # type: ignore[attr-defined]
    assert memoryview(ids).tolist() == [256, 256]


def test_str_and_bytes_texts_in_one_call_keep_their_order(encoder: CompiledBpe) -> None:
    texts: list[str | bytes] = ["ab", b"ab a", "", b"", "zażółć 中", "zażółć 中".encode(), "a\ud800", b"\xef\xbf\xbd"]
    ids = [one.tolist() for one in encoder.encode(texts)]
    assert ids[0] == [256] and ids[1] == [256, 257] and ids[2] == ids[3] == []
    assert ids[4] == ids[5] and ids[6][1:] == ids[7]
    with pytest.raises(TypeError, match=r"texts\[1\] is bytearray, not str or bytes"):
        encoder.encode(["ab", bytearray(b"ab")])  # type: ignore[list-item]


def test_long_bytes_of_every_script_equal_their_text() -> None:
    ranks = {bytes([b]): b for b in range(256)}
    encoder = CompiledBpe(ranks, GPT2_PATTERN)
    for unit in ("a", "ż", "ж", "中", "😀", "a ż 中 😀\n"):
        text = unit * 50_000
        as_str, as_bytes = encoder.encode([text, text.encode()])
        assert as_bytes.tolist() == as_str.tolist() == list(text.encode())
        assert utf8_characters(text.encode()) == len(text)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("extra", [{}, {b"abc": MAX_ID}], ids=["compiled", "tiktoken"])
@pytest.mark.parametrize(("bad", "note"), [(b"abc\xffdef", "byte 3"), (b"ab\xe2\x82", "bytes 2-3")])
def test_encode_arrays_names_the_text_that_is_not_utf8(extra: dict[bytes, int], threads: int, bad: bytes,
                                                       note: str) -> None:
    tokenizer = BpeTokenizer(ranks={bytes([b]): b for b in range(256)} | {b"ab": 256} | extra, pattern=GPT2_PATTERN)
    assert tokenizer.engine == ("compiled" if not extra else "tiktoken")
    texts: list[str | bytes] = ["ok " * 40] * 30 + [b"fine " * 40] * 30 + [bad, b"\xff later", bad]
    expected = _python(bad)
    with pytest.raises(UnicodeDecodeError) as caught:
        tokenizer.encode_arrays(texts, num_threads=threads)
    error = caught.value  # bytes.decode's own error, for the first text refused
    assert (error.start, error.end, error.reason) == expected and error.object == bad and error.encoding == "utf-8"
    assert getattr(error, "__notes__", None) == [f"texts[60] is not UTF-8 at {note}"]
