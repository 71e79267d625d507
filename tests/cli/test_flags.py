"""The library's messages name Python parameters; the command line says them as its flags, in one
place (``tokpack.cli._flags``), and no library module speaks in flags."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokpack
from tokpack.cli import app

from conftest import REPO

SRC = REPO / "src" / "tokpack"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: A flag inside another program's command line is that program's (``ray start --head``,
#: ``sbatch --array``, a suggested ``tokpack`` command), not a parameter said as a flag.
COMMAND_LINE = re.compile(r"(?:\btokpack [a-z]|\bray start|\bsbatch|\bpip )")
#: Strings that are not messages: a page's CSS variables, pip's own arguments.
NOT_MESSAGES = {"report/page.py", "grading/baselines.py"}


def _one_line_error(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:"), result.output
    return lines[0]


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree) if isinstance(node, kinds) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _flags_said(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return [f"{path.relative_to(SRC)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            and FLAG.search(node.value) and not COMMAND_LINE.search(node.value)]


def test_no_library_message_names_a_flag() -> None:
    speaking = {}
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name.startswith("cli/") or name in NOT_MESSAGES:
            continue
        said = _flags_said(path)
        if said:
            speaking[name] = said
    assert not speaking, f"name Python parameters (vocab_size, on_error='skip'), not flags: {speaking}"


def test_a_python_caller_reads_parameters(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"body": "hello"}\n', encoding="utf-8")
    with pytest.raises(tokpack.errors.InputError, match=r"name the field with text_field=NAME$"):
        tokpack.prepare(docs, vocab_size=300, cache_dir=tmp_path / "c")


def test_the_command_line_says_the_same_message_in_its_flags(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"body": "hello"}\n', encoding="utf-8")
    line = _one_line_error(["prepare", str(docs), "--vocab-size", "300", "--cache-dir", str(tmp_path / "c")])
    assert line.endswith("name the field with --text-field NAME")


def _every_option_name() -> set[str]:
    import click

    from tokpack.cli._flags import flags_of

    names: set[str] = set()

    def walk(command: click.Command) -> None:
        names.update(flags_of(command.params))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    import typer.main

    walk(typer.main.get_command(app))
    return names


def test_a_library_parameter_of_another_name_is_said_as_its_option() -> None:
    from tokpack.cli._flags import OPTION_NAMES, in_flags

    options = _every_option_name()
    assert set(OPTION_NAMES.values()) <= options, "each mapping names a real option"
    flags = {"allow_smaller_vocab": ("--allow-smaller-vocab", None), "merges": ("--merges", None),
             "out": ("--out", None), "workers": ("--workers", None)}
    assert in_flags("or accept fewer with allow_smaller=True", flags) == "or accept fewer with --allow-smaller-vocab"
    assert in_flags("num_merges must be 0 or more, got -1", flags) == "--merges must be 0 or more, got -1"
    assert in_flags("name a new folder with dataset=PATH", flags) == "name a new folder with --out PATH"
    assert in_flags("processes must be at least 1", flags) == "--workers must be at least 1"


def test_a_cut_mismatch_names_parameters_in_python_and_flags_on_the_command_line(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"line {i} of the corpus<|endoftext|>\n" for i in range(200)), encoding="utf-8")
    tokpack.prepare(corpus, vocab_size=260, validation=0.1, separator="<|endoftext|>", cache_dir=tmp_path / "c")
    with pytest.raises(tokpack.errors.InputError, match=r"cut with separator='<\|endoftext\|>', this run asks for "
                                                      r"separator='\\n'; pass separator='<\|endoftext\|>'"):
        tokpack.prepare(corpus, vocab_size=260, separator="\n", cache_dir=tmp_path / "c")
    line = _one_line_error(["prepare", str(corpus), "--vocab-size", "260", "--separator", "\n",
                            "--cache-dir", str(tmp_path / "c")])
    assert "cut with --separator '<|endoftext|>', this run asks for --separator $'\\n'; pass --separator" in line, line


@pytest.mark.parametrize("name", ["test", "manifest", "out"])
def test_a_file_named_like_a_flag_is_said_as_the_file(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path(name).write_bytes(b"hello \xff\xfe world\n")
    line = _one_line_error(["prepare", name, "--vocab-size", "300", "--cache-dir", str(tmp_path / "c")])
    assert line.startswith(f"error: {name}: invalid UTF-8 at byte 6"), line


def test_a_file_named_like_a_parameter_stays_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("text_field.jsonl").write_text('{"body": "hello"}\n', encoding="utf-8")
    line = _one_line_error(["prepare", "text_field.jsonl", "--vocab-size", "300", "--cache-dir", "c"])
    assert line.startswith("error: text_field.jsonl: record at byte 0"), line
    assert line.endswith("name the field with --text-field NAME"), line
    line = _one_line_error(["prepare", "text_field.jsonl", "--vocab", "vocab_size.tiktoken", "--cache-dir", "c"])
    assert line.startswith("error: vocab_size.tiktoken: "), line
    Path("test").write_bytes(b"\xff\xfe not UTF-8")
    line = _one_line_error(["prepare", "test", "--vocab-size", "300", "--cache-dir", "c"])
    assert line.startswith("error: test: is UTF-16 text"), line


def test_a_name_with_a_value_inside_a_path_or_url_stays_as_written() -> None:
    from tokpack.cli._flags import in_flags

    flags = {"rank": ("--rank", None), "vocab_size": ("--vocab-size", None), "split": ("--split", None)}
    assert in_flags("games/rank=3/month=01/games.parquet: not Parquet", flags) == \
        "games/rank=3/month=01/games.parquet: not Parquet"
    assert in_flags("see https://example.com/x?split=train&vocab_size=3; pass vocab_size=300", flags) == \
        "see https://example.com/x?split=train&vocab_size=3; pass --vocab-size 300"


def test_a_value_or_a_quoted_field_is_not_read_as_a_parameter(tmp_path: Path) -> None:
    from tokpack.cli._flags import in_flags

    flags = {"text_field": ("--text-field", None), "vocab_size": ("--vocab-size", None)}
    assert in_flags("text_field='vocab_size' names no column", flags) == "--text-field vocab_size names no column"
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"body": "hello", "min_frequency": 3}\n', encoding="utf-8")
    line = _one_line_error(["prepare", str(docs), "--text-field", "vocab_size", "--vocab-size", "300",
                            "--cache-dir", str(tmp_path / "c")])
    assert "no string field 'vocab_size' (its fields: 'body', 'min_frequency')" in line, line


def test_a_relative_path_with_a_key_and_value_stays_as_written() -> None:
    from tokpack.cli._flags import in_flags

    flags = {"rank": ("--rank", None), "test": ("--test", None), "vocab_size": ("--vocab-size", None)}
    assert in_flags("rank=3/month=01/games.parquet: not Parquet", flags) == "rank=3/month=01/games.parquet: not Parquet"
    assert in_flags("cannot read rank=3.parquet; pass test=0.1", flags) == "cannot read rank=3.parquet; pass --test 0.1"
    assert in_flags(r"data\rank=3\vocab_size\x.bin: truncated", flags) == r"data\rank=3\vocab_size\x.bin: truncated"
    assert in_flags("rank=N names the shard, rank=None all", flags) == "--rank N names the shard, no --rank all"


def test_quoted_data_that_looks_like_a_setting_stays_as_written() -> None:
    from tokpack.cli._flags import in_flags

    flags = {"rank": ("--rank", None), "test": ("--test", None)}
    assert in_flags("no string field 'rank=3' (its fields: \"test=1\", 'body')", flags) == \
        "no string field 'rank=3' (its fields: \"test=1\", 'body')"
    assert in_flags("token 'test=1' is not in the byte-level alphabet", flags) == \
        "token 'test=1' is not in the byte-level alphabet"
