"""The error model: a user's mistake is one line and exit 2, a bug says so and exits 1."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

import tokpack
import tokpack.store
from tokpack.cli import _console, app
from tokpack.errors import InputError, IntegrityError, TokpackError, VocabularyMismatch, located
from tokpack.serve.memory import pack_of_documents

runner = CliRunner()


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_every_error_is_a_value_error_where_the_seeds_promise_one() -> None:
    for kind in (InputError, IntegrityError, VocabularyMismatch):
        assert issubclass(kind, TokpackError) and issubclass(kind, ValueError)
    assert str(InputError("no string field 'text'", where="c.jsonl", byte=12, fix="use --text-field body")) == (
        "c.jsonl: byte 12: no string field 'text'; use --text-field body"
    )
    assert located("games.pgn", "illegal move", game=12_345) == "games.pgn: game 12,345: illegal move"


def test_require_vocabulary_raises_a_vocabulary_mismatch(tmp_path: Path) -> None:
    one = tokpack.Pack(pack_of_documents([[1, 2, 3]], n_vocab=7, pad_id=0, directory=tmp_path / "a"))
    other = tokpack.Pack(pack_of_documents([[1, 2, 3]], n_vocab=9, pad_id=0, directory=tmp_path / "b"))
    with pytest.raises(VocabularyMismatch, match="n_vocab 9"):
        tokpack.require_vocabulary(one.meta, SimpleNamespace(identity=other.vocabulary))


def test_a_tampered_pack_is_an_integrity_error_and_exit_2(tmp_path: Path) -> None:
    pack = pack_of_documents([[1, 2, 3], [4, 5]], n_vocab=7, pad_id=0, directory=tmp_path / "p")
    tokens = pack / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-1] ^= 1
    tokens.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="tokens.npy"):
        tokpack.Pack(pack, verify=True)
    result = runner.invoke(app, ["inspect", str(pack), "--verify"])
    assert result.exit_code == 2
    assert _lines(result.stderr) and len(_lines(result.stderr)) == 1 and "tokens.npy" in result.stderr


def test_a_missing_file_is_the_users_mistake(tmp_path: Path) -> None:
    result = runner.invoke(app, ["inspect", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert len(_lines(result.stderr)) == 1 and "nowhere" in result.stderr


def test_a_bug_says_so_and_exits_1_without_a_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("shard_count")

    monkeypatch.setattr(tokpack.store, "open_tokens", broken)  # the command imports it when it runs
    result = runner.invoke(app, ["inspect", str(tmp_path)])
    assert result.exit_code == 1
    lines = _lines(result.stderr)
    assert len(lines) == 1 and "bug in tokpack" in lines[0] and "KeyError" in lines[0] and "--debug" in lines[0]
    assert "Traceback" not in result.output


def test_debug_lets_the_traceback_through(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("shard_count")

    monkeypatch.setattr(tokpack.store, "open_tokens", broken)  # the command imports it when it runs
    monkeypatch.setattr(_console, "debug", False)
    result = runner.invoke(app, ["--debug", "inspect", str(tmp_path)])
    assert result.exit_code == 1
    assert isinstance(result.exception, KeyError)  # not swallowed: the runner saw the real exception
