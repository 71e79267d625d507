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
