"""What every corpus benchmark's child process shares: the hidden ``--child MODE --corpus PATH``
arguments, the command that starts a child, and a child's run (its mode on the corpus with
GPT-2's ranks, the result printed as one JSON line)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from registry import gpt2_rank_file  # noqa: E402

#: ``child(mode, corpus, ranks)``: one measurement, as a JSON-able dict.
Child = Callable[[str, Path, Path], dict[str, Any]]


def add_child_arguments(parser: argparse.ArgumentParser, modes: Sequence[str]) -> None:
    """The arguments a parent passes to its children (hidden from ``--help``)."""
    parser.add_argument("--child", choices=modes, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)


def ran_as_child(args: argparse.Namespace, child: Child) -> bool:
    """In a child (``--child`` given): run its mode, print the result as JSON, and say so."""
    if not args.child:
        return False
    print(json.dumps(child(args.child, args.corpus, gpt2_rank_file())))
    return True


def child_command(script: str, mode: str, corpus: Path) -> list[str]:
    """The command that measures ``mode`` on ``corpus`` in a fresh interpreter running ``script``."""
    return [sys.executable, script, "--child", mode, "--corpus", str(corpus)]
