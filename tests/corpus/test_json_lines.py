"""A JSON Lines record that does not parse is said whole: where (the record's byte, and the byte in
it), what is wrong in words (json's own messages for some end in "at"), and the fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokpack.corpus.sources import open_corpus
from tokpack.errors import InputError

GOOD = b'{"text": "ok"}\n'


@pytest.mark.parametrize(("record", "said"), [
    (b'{"text": "cut short\n', r"record at byte 15 is invalid JSON at its byte 19: the line ends inside a string "
                               r"\(its closing quote is missing: the record was cut short\?\); "),
    (b'{"text": "a\tb"}\n', r"record at byte 15 is invalid JSON at its byte 11: an unescaped control character "
                            r"\(U\+0009, a tab\) inside a string: JSON writes it escaped, as \\t or \\u0009; "),
    (b'{"text": "a\x01b"}\n', r"an unescaped control character \(U\+0001\) inside a string: JSON writes it escaped, "
                              r"as \\u0001; "),
    (b'{"text": broken}\n', r"record at byte 15 is invalid JSON at its byte 9: expecting value; "),
    (b'{"text": "\xc5\xbc" x}\n', r"invalid JSON at its byte 14: expecting ',' delimiter; "),  # bytes (13 characters)
])
def test_a_record_that_is_not_json_is_said_whole_with_the_fix(tmp_path: Path, record: bytes, said: str) -> None:
    corpus = tmp_path / "records.jsonl"
    corpus.write_bytes(GOOD + record + GOOD)
    with open_corpus(corpus) as source, pytest.raises(InputError) as caught:
        list(source.pieces())
    assert str(caught.value).startswith(f"{corpus}: ")
    assert caught.value.args[0].endswith("fix or remove that record, or skip such records with on_error='skip'")
    assert " at)" not in str(caught.value)
    assert re.search(said, str(caught.value)), str(caught.value)
    with open_corpus(corpus, on_error="skip") as source:
        assert [piece.text for piece in source.pieces()] == ["ok", "ok"]
