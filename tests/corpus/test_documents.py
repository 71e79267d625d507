"""The document-cut rule at every edge, and as a property over random text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack._files import FileBytes
from tokpack.corpus.documents import cut_documents


def cuts(data: bytes, limit: int, start: int = 0, end: int | None = None) -> list[bytes]:
    return [data[a:b] for a, b in cut_documents(data, start, len(data) if end is None else end, limit)]


def test_newline_exactly_at_the_limit_ends_the_document_there() -> None:
    assert cuts(b"abc\ndef\n", 4) == [b"abc\n", b"def\n"]


def test_document_ends_at_the_last_newline_before_the_limit() -> None:
    assert cuts(b"a\nb\ncdefgh", 6) == [b"a\nb\n", b"cdefgh"]
    assert cuts(b"a\nb\ncdefghij", 6) == [b"a\nb\n", b"cdefgh", b"ij"]


def test_no_newline_cuts_exactly_at_the_limit() -> None:
    assert cuts(b"abcdefghij", 4) == [b"abcd", b"efgh", b"ij"]


def test_multibyte_character_at_the_limit_moves_the_cut_back() -> None:
    data = "abcż€𝄞".encode()  # 3 ASCII, then 2-, 3- and 4-byte characters
    assert cuts(data, 4) == [b"abc", "ż".encode(), "€".encode(), "𝄞".encode()]
    assert all(piece.decode() for piece in cuts(data, 5))


def test_documents_never_span_a_range_boundary() -> None:
    data = b"one line\nanother\n"
    assert cuts(data, 100, 0, 5) == [b"one l"]
    assert cuts(data, 100, 5, len(data)) == [b"ine\nanother\n"]


def test_empty_range_has_no_documents() -> None:
    assert cuts(b"abc", 4, 2, 2) == []
    assert cuts(b"", 4) == []


def test_limit_below_one_character_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 4"):
        cuts(b"abc", 3)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab \nżé€😀\r"), max_size=200), st.integers(4, 40), st.data())
def test_cut_rule_as_a_property(text: str, limit: int, data: st.DataObject) -> None:
    encoded = text.encode()
    start = data.draw(st.integers(0, len(encoded)))
    while start < len(encoded) and encoded[start] & 0xC0 == 0x80:
        start += 1  # ranges begin at character starts, as manifests must
    pieces = cuts(encoded, limit, start, len(encoded))
    assert b"".join(pieces) == encoded[start:]  # the documents tile the range
    for index, piece in enumerate(pieces):
        assert 0 < len(piece) <= limit
        piece.decode()  # never splits a character
        last = index == len(pieces) - 1
        window = encoded[start + sum(map(len, pieces[:index])):][:limit]
        if not last and b"\n" in window:
            assert piece == window[: window.rindex(b"\n") + 1]  # the last newline within the limit


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64).map(lambda b: b.replace(b"\x00", b"\n")),
       sub=st.sampled_from([b"\n", b"\n\n", b"ab\n", b"\na"]), start=st.integers(-4, 70), end=st.integers(-4, 70),
       block=st.integers(1, 9))
def test_a_files_rfind_read_backwards_in_blocks_finds_what_bytes_rfind_finds(
        tmp_path_factory: pytest.TempPathFactory, data: bytes, sub: bytes, start: int, end: int, block: int) -> None:
    path = tmp_path_factory.mktemp("rfind") / "f.txt"
    path.write_bytes(data)
    file = FileBytes(path)
    try:
        low, high = max(start, 0), min(max(end, 0), len(data))
        assert file.rfind(sub, low, high, block=block) == data.rfind(sub, low, high)
    finally:
        file.close()
