"""One way to build an error: ``XError(what, *, where=, byte=, line=, game=, fix=)``."""

from __future__ import annotations

import doctest
import pickle
from pathlib import Path

import pytest

import tokpack.errors
from tokpack.bpe.challenge import ChallengeRefused
from tokpack.errors import (
    InputError,
    IntegrityError,
    MissingExtra,
    TokpackError,
    VocabularyMismatch,
    WorkerDied,
    located,
)

KINDS = (TokpackError, InputError, IntegrityError, VocabularyMismatch, WorkerDied, MissingExtra, ChallengeRefused)


@pytest.mark.parametrize("kind", KINDS)
def test_a_positional_place_is_refused(kind: type[TokpackError]) -> None:
    # The old two-positional form would silently read the place as the message's first part.
    with pytest.raises(TypeError):
        kind("corpus.jsonl", "not JSON")  # type: ignore[misc]


@pytest.mark.parametrize("kind", KINDS)
def test_where_byte_and_fix_are_keywords_in_the_documented_order(kind: type[TokpackError]) -> None:
    error = kind("no string field 'text'", where=Path("c.jsonl"), byte=12, fix="use --text-field body")
    assert str(error) == "c.jsonl: byte 12: no string field 'text'; use --text-field body"
    assert str(kind("not JSON", where="a.jsonl", line=3)) == "a.jsonl: line 3: not JSON"
    assert str(kind("illegal move", where="g.pgn", game=12_345)) == "g.pgn: game 12,345: illegal move"


def test_the_message_alone_and_with_a_fix() -> None:
    assert str(InputError("--block must be a positive integer")) == "--block must be a positive integer"
    assert str(InputError("no training month left", fix="lower val_fraction")) == "no training month left; lower val_fraction"
    # where=None is the same as no place at all (never the text "None").
    assert str(IntegrityError("x", where=None, fix="y")) == "x; y"


@pytest.mark.parametrize(
    "keywords",
    [{}, {"where": "a.txt"}, {"where": "a.txt", "byte": 10_000, "fix": "f"}, {"line": 9_999}, {"game": 1, "fix": "g"}],
)
def test_the_error_says_what_located_says(keywords: dict[str, object]) -> None:
    where = keywords.pop("where", None)
    assert str(InputError("bad", where=where, **keywords)) == located(where, "bad", **keywords)  # type: ignore[arg-type]


def test_an_error_crosses_a_process_boundary_unchanged() -> None:
    # Workers send errors back pickled: unpickling rebuilds from the message alone.
    error = IntegrityError("sha256 differs", where="pack/tokens.npy", fix="delete it")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is IntegrityError and str(copy) == str(error)


def test_the_errors_module_doctests_show_the_keywords() -> None:
    result = doctest.testmod(tokpack.errors, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0
    assert 'where="x.txt"' in (tokpack.errors.__doc__ or "")
