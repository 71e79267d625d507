"""``tokpack --help`` (and every command's --help) loads only the command line: the library,
numpy, pydantic, rich and the encoders are imported by the command that runs, not by its help.

No timings here (the machine is shared); what makes the help slow is what it imports, so that is
what is held. bench/bench_startup.py measures the CPU seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer

from conftest import REPO

#: What the help must not import: the numeric and encoding stack, the data formats, the rich
#: renderer (typer's plain help needs none of it), and any part of the library below the CLI.
HEAVY = ("numpy", "pydantic", "rich", "numba", "pyarrow", "tiktoken", "tokenizers", "torch", "fsspec", "regex",
         "pandas", "sentencepiece", "chess", "zstandard")
#: The only tokpack modules the help may load: the package (its names are lazy), the errors and the CLI.
LIGHT_TOKPACK = {"tokpack", "tokpack._lazy", "tokpack.errors", "tokpack._extras"}

# Run in a fresh interpreter: the tokpack command's entry point with ARGS, then the loaded modules.
_ENTRY = """
import atexit, json, sys
atexit.register(lambda: print("\\nMODULES " + json.dumps(sorted(sys.modules))))
sys.argv = ["tokpack", *json.loads(sys.argv[1])]
from tokpack.cli import main
main()
"""

# Every command's --help in one interpreter: the union of what they import.
_EVERY_HELP = """
import contextlib, io, json, sys
import typer
from tokpack.cli import app
root = typer.main.get_command(app)
helps = {}
def walk(command, path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            root.main([*path, "--help"], prog_name="tokpack")
        except SystemExit as done:
            assert done.code in (0, None), (path, done.code)
    helps[" ".join(path)] = out.getvalue()
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        walk(sub, [*path, name])
walk(root, [])
print(json.dumps({"helps": helps, "modules": sorted(sys.modules)}))
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "200"}
    env.pop("TOKPACK_DEBUG", None)
    return env


def _heavy(modules: list[str]) -> list[str]:
    """The loaded modules the help should not have needed."""
    return sorted(m for m in modules
                  if m.split(".")[0] in HEAVY
                  or (m.split(".")[0] == "tokpack" and m not in LIGHT_TOKPACK and not m.startswith("tokpack.cli")))


def _run_entry(*args: str) -> tuple[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", _ENTRY, json.dumps(list(args))], env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text, _, modules = done.stdout.rpartition("\nMODULES ")
    return text, json.loads(modules)


def _run_program(program: str) -> subprocess.CompletedProcess[str]:
    """``python -c program`` in a fresh interpreter that imports this checkout's sources."""
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def _commands() -> dict[str, typer.core.TyperCommand]:
    """Every command and group of the app, by its path ('' for tokpack itself)."""
    from tokpack.cli import app

    found: dict[str, typer.core.TyperCommand] = {}

    def walk(command: typer.core.TyperCommand, path: list[str]) -> None:
        found[" ".join(path)] = command
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])  # type: ignore[arg-type]
    return found


def test_tokpack_help_imports_no_library_nor_numpy_pydantic_or_rich() -> None:
    text, modules = _run_entry("--help")
    assert "Usage: tokpack" in text and "Commands:" in text
    for name in _commands()[""].commands:  # type: ignore[attr-defined]
        assert name in text, f"tokpack --help does not list {name}"
    assert _heavy(modules) == [], f"tokpack --help imported {_heavy(modules)}"


def test_every_commands_help_lists_its_options_and_imports_no_library() -> None:
    done = subprocess.run([sys.executable, "-c", _EVERY_HELP], env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    commands = _commands()
    assert set(result["helps"]) == set(commands)
    assert len(commands) >= 20  # prepare, inspect, demo, merge, report, export, import and the groups' commands
    for path, command in commands.items():
        text = result["helps"][path]
        assert text.startswith(f"Usage: tokpack {path}".rstrip()), text
        for name in getattr(command, "commands", {}):
            assert name in text, f"tokpack {path} --help does not list {name}"
        for param in command.params:
            for name in (*param.opts, *param.secondary_opts):
                if name.startswith("-"):
                    assert name in text, f"tokpack {path} --help does not list {name}"
    heavy = _heavy(result["modules"])  # typer's options read without its pydantic adapters (tokpack.cli._values)
    assert heavy == [], f"the commands' --help imported {heavy}"


def test_version_and_a_usage_error_import_no_library() -> None:
    text, modules = _run_entry("--version")
    assert text.startswith("tokpack ")
    assert _heavy(modules) == []
    done = subprocess.run([sys.executable, "-c", _ENTRY, json.dumps(["prepare", "--no-such-option"])], env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--no-such-option" in done.stderr and "Traceback" not in done.stderr


def test_import_tokpack_is_light_and_every_public_name_is_there() -> None:
    script = ("import json, sys, tokpack; before = sorted(sys.modules); from tokpack import *; "
              "names = {n: type(getattr(tokpack, n)).__name__ for n in tokpack.__all__}; "
              "print(json.dumps([before, names, callable(tokpack.export), sorted(dir(tokpack))]))")
    done = subprocess.run([sys.executable, "-c", script], env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, names, export_callable, listed = json.loads(done.stdout)
    assert _heavy(before) == []
    assert {"GPT2_PATTERN", "GPT4_PATTERN", "BpeTokenizer", "CorpusManifest", "Pack", "PrepareProgress",
                          "TokenBatches", "TokenizedCorpus", "VocabIdentity", "load_vocabulary", "prepare",
                          "require_vocabulary", "sample_corpus", "tokenizer_for"} <= set(names)
    assert names["prepare"] == "function" and names["GPT4_PATTERN"] == "str" and export_callable
    assert set(names) <= set(listed)


def test_an_unknown_attribute_of_tokpack_is_an_attribute_error() -> None:
    import tokpack

    with pytest.raises(AttributeError, match="no_such_name"):
        tokpack.no_such_name  # noqa: B018


def test_the_grade_thresholds_the_help_shows_are_the_graders() -> None:
    from tokpack.cli import tokenizer
    from tokpack.grading import grade

    assert (tokenizer.MIN_GLOBAL, tokenizer.MIN_DOMAIN) == (grade.MIN_GLOBAL, grade.MIN_DOMAIN)


def test_the_console_is_made_when_first_used_and_kept() -> None:
    from tokpack.cli import _console

    assert _console.console is _console.stdout() and _console.errors is _console.stderr()
    assert _console.errors.stderr and not _console.console.stderr
    with pytest.raises(AttributeError):
        _console.no_such_console  # noqa: B018


@pytest.mark.parametrize("entry", ["script", "main"])
def test_the_commands_own_process_exits_without_collecting_what_it_leaves_alive(entry: str) -> None:
    """The installed ``tokpack`` (and ``python -m tokpack.cli``) freezes what is alive as it exits,
    so the interpreter's shutdown skips its full collections over it; a program that calls
    ``main()`` keeps its collector as it was."""
    program = ("import gc, sys\n"
               f"from tokpack.cli import {entry}\n"
               "sys.argv = ['tokpack', '--help']\n"
               "try:\n"
               f"    {entry}()\n"
               "except SystemExit:\n"
               "    pass\n"
               "print(gc.get_freeze_count() > 0)\n")
    done = _run_program(program)
    assert done.stdout.strip().splitlines()[-1] == str(entry == "script")
    module = subprocess.run([sys.executable, "-m", "tokpack.cli", "--version"], capture_output=True, text=True,
                            check=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert module.stdout.startswith("tokpack ")


def test_the_commands_own_process_walks_nothing_its_imports_made_and_collects_rarely() -> None:
    """While the installed ``tokpack`` runs its command, what importing the command line made is
    frozen (never walked by a collection again) and the young generation is collected after
    100,000 new objects, not 700: one ``prepare`` of 10 MB makes ~53,000 and none is garbage."""
    program = ("import gc, sys\n"
               "import tokpack.cli as cli\n"
               "seen = {}\n"
               "cli.main = lambda: seen.update(threshold=gc.get_threshold()[0], frozen=gc.get_freeze_count())\n"
               "cli.script()\n"
               "print(seen['threshold'], seen['frozen'] > 1000)\n")
    done = _run_program(program)
    assert done.stdout.split() == ["100000", "True"], done.stdout


def test_the_commands_own_process_imports_the_command_line_under_the_rarer_collector() -> None:
    """``import tokpack.cli`` imports neither typer nor a command, so the installed ``tokpack``
    raises the young generation's threshold before typer, click and the command line are imported
    (their imports ran some 25 collections under Python's 700); ``tokpack.cli.app`` is still there."""
    program = ("import gc, sys\n"
               "import tokpack.cli as cli\n"
               "light = not any(name == 'typer' or name.startswith(('typer.', 'tokpack.cli.')) for name in sys.modules)\n"
               "seen = {}\n"
               "class Watch:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        seen.setdefault(name, gc.get_threshold()[0])\n"
               "sys.meta_path.insert(0, Watch())\n"
               "cli.main = lambda: None\n"
               "cli.script()\n"
               "print(light, seen.get('typer'), seen.get('tokpack.cli._root'), type(cli.app).__name__)\n")
    done = _run_program(program)
    assert done.stdout.split() == ["True", "100000", "100000", "Typer"], done.stdout
