"""Every command's options read a plainly written value without pydantic
(:mod:`tokpack.cli._values`), and what they read is what typer's own pydantic adapter reads; any
other value goes to typer's adapter, so its errors are typer's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.cli import app
from tokpack.cli._values import NOT_PLAIN, plain_value

from conftest import REPO

_coercion = pytest.importorskip("typer._coercion", reason="a typer without per-option adapters: nothing to hold")


def _options() -> list[tuple[str, Any, Any]]:
    """(the command's path and option's name, the command, the option) for every option of every command."""
    found = []

    def walk(command: Any, path: str) -> None:
        for param in command.params:
            if getattr(param, "type_descriptor", None) is not None:
                found.append((f"{path} {param.name}", command, param))
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "tokpack")
    return found


OPTIONS = _options()
KINDS = {id(param): param.type_descriptor.annotation for _, _, param in OPTIONS}
#: Values written the ways a command line writes them, plainly and otherwise.
WRITTEN = ["0", "7", "-3", "12345678901234567890", "007", "+5", " 5", "5 ", "1_000", "1e3", "0x10", "",
           "0.5", "1.", ".5", "-2.25", "1e-3", "nan", "inf", "text", "exact", "hf", "EXACT", "raise", "skip",
           "local", "ray", "array", "-", ".", "/", "a/b", "dir/", "~", "é", "ja\u3000", "3"]


_OWN: dict[int, Any] = {}


def _typers(command: Any, param: Any, value: Any) -> tuple[str, Any]:
    """What typer's own adapter makes of ``value``: ("read", the value) or ("refused", the message)."""
    own = _OWN.get(id(param)) or _OWN.setdefault(id(param), _coercion.build_runtime_param(param.type_descriptor))
    try:
        return "read", own.coerce(value, param=param, ctx=typer.main._click.Context(command))
    except Exception as error:  # noqa: BLE001 - typer's refusal, compared by kind
        return "refused", type(error).__name__


def _same(command: Any, param: Any, value: Any) -> None:
    read = plain_value(param.type_descriptor.annotation, param.type_descriptor.parameter_info, value)
    if read is NOT_PLAIN:
        return
    kind, theirs = _typers(command, param, value)
    assert kind == "read", (param.name, value, theirs)
    assert type(read) is type(theirs) and read == theirs, (param.name, value, read, theirs)


def test_every_kind_of_option_is_seen() -> None:
    kinds = set(KINDS.values())
    assert {str, int, float, Path} <= kinds and any(isinstance(kind, type) and issubclass(kind, __import__("enum").Enum)
                                                    for kind in kinds)


@pytest.mark.parametrize(("name", "command", "param"), OPTIONS, ids=[name for name, _, _ in OPTIONS])
def test_a_plainly_read_value_is_what_typer_reads(name: str, command: Any, param: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b").write_text("x")
    (tmp_path / "dir").mkdir()
    for value in [*WRITTEN, param.default]:
        if value is not None:
            _same(command, param, value)


def test_the_plain_kinds_are_read_without_typer() -> None:
    """The values the commands take most are read here, not handed over (what spares the adapters)."""
    by_kind = {kind: (command, param) for _, command, param in OPTIONS for kind in [param.type_descriptor.annotation]}
    for kind, value in [(int, "12"), (float, "0.25"), (str, "words"), (Path, "no/such/file")]:
        command, param = by_kind[kind]
        info = param.type_descriptor.parameter_info
        if kind is int:
            info = type(info)()  # the range of one option aside
        assert plain_value(kind, info, value) == kind(value)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(OPTIONS), st.text(max_size=12) | st.from_regex(r"-?[0-9]{1,6}(\.[0-9]{1,4})?", fullmatch=True))
def test_any_text_is_read_as_typer_reads_it_or_left_to_typer(option: tuple[str, Any, Any], value: str) -> None:
    _, command, param = option
    _same(command, param, value)


def test_a_value_typer_refuses_is_refused_in_typers_words() -> None:
    from typer.testing import CliRunner

    for args, said in [(["bpe", "train", "x", "--min-frequency", "0"], "greater than or equal to 1"),
                       (["prepare", "x", "--trainer", "foo"], "'foo' is not one of 'exact', 'hf'"),
                       (["prepare", "x", "--workers", "many"], "--workers")]:
        done = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert done.exit_code == 2 and said in done.output, (args, done.output)


def test_prepare_builds_no_pydantic_adapter_for_its_options(tmp_path: Path) -> None:
    """A ``prepare`` with every kind of option written plainly reads them all without typer's adapters."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("Ala ma kota.\n" * 50, encoding="utf-8")
    code = ("import sys, tokpack.cli as cli\nsys.argv[0] = 'tokpack'\ntry:\n    cli.main()\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\nprint('ADAPTERS' if 'typer._adapters' in sys.modules else 'NONE')\n")
    done = subprocess.run([sys.executable, "-c", code, "prepare", str(corpus), "--vocab-size", "300", "--allow-smaller-vocab", "--document-bytes",
                           "64", "--trainer", "exact", "--validation", "0.1", "--text-field", "text", "-o",
                           str(tmp_path / "pack"), "--workers", "1", "--json"],
                          env={**os.environ, "PYTHONPATH": str(REPO / "src"), "TOKPACK_CACHE": str(tmp_path / "cache")},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("NONE")
