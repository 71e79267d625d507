"""``tokpack NAME ...`` builds the one command (or command group) it runs, not all of them: what
it says and does is what the whole command line says and does for the same arguments."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tokpack.cli import app, command_line

NAMES = [info.name for info in app.registered_commands] + [info.name for info in app.registered_groups]


def test_every_top_level_name_is_seen() -> None:
    assert {"prepare", "inspect", "shard", "tokenizer", "serve"} <= set(NAMES)


@pytest.mark.parametrize("args", [[name, "--help"] for name in NAMES] + [
    ["--debug", "prepare", "-h"], ["prepare"], ["prepare", "--no-such-option"], ["prepare", "--workers", "zero", "x"],
    ["inspect", "/no/such/pack"], ["tokenizer"], ["shard", "run", "--help"], ["serve", "nothing-such"],
])
def test_one_command_says_what_the_whole_command_line_says(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from tokpack.cli import _console

    monkeypatch.setattr(_console, "debug", _console.debug)  # --debug sets it for the process
    alone = command_line(args)
    assert alone is not app and len(alone.registered_commands) + len(alone.registered_groups) == 1
    runner = CliRunner()
    whole, one = runner.invoke(app, args, env={"COLUMNS": "100"}), runner.invoke(alone, args, env={"COLUMNS": "100"})
    assert whole.output and (one.exit_code, one.output) == (whole.exit_code, whole.output)


@pytest.mark.parametrize("args", [[], ["--help"], ["-h"], ["--version"], ["prepar", "x"], ["--debug"],
                                  ["--debug", "--help", "prepare"]])
def test_no_command_or_an_unknown_name_builds_every_command(args: list[str]) -> None:
    assert command_line(args) is app


def test_the_corpus_commands_are_registered_alone_without_the_other_commands_modules() -> None:
    """``tokpack prepare`` (and every name the corpus module registers) builds its app from that
    module alone: the other commands' modules stay unimported."""
    import json
    import os
    import subprocess
    import sys

    from tokpack.cli import CORPUS_NAMES, _root, corpus

    from conftest import REPO

    fresh = _root.new_app()
    corpus.register(fresh)
    assert {info.name for info in [*fresh.registered_commands, *fresh.registered_groups]} == CORPUS_NAMES
    program = ("import json, sys\n"
               "from tokpack.cli import command_line\n"
               "built = {name: len(command_line([name, 'x']).registered_commands) for name in sys.argv[1:]}\n"
               "print(json.dumps([built, sorted(m for m in sys.modules if m.startswith('tokpack.cli.'))]))\n")
    done = subprocess.run([sys.executable, "-c", program, *sorted(CORPUS_NAMES)], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    built, modules = json.loads(done.stdout)
    assert built == {name: int(name != "shard") for name in CORPUS_NAMES}
    others = {"tokpack.cli._app", "tokpack.cli.bpe", "tokpack.cli.chess", "tokpack.cli.interop", "tokpack.cli.report",
              "tokpack.cli.serve", "tokpack.cli.tokenizer"}
    assert "tokpack.cli.corpus" in modules and not others & set(modules), modules
