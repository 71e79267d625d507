"""The README's Python examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def section_code(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(re.findall(r"```python\n(.*?)```", section, flags=re.S))


def test_train_on_it_snippet_runs(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")
    code = section_code("Train on it")
    assert "make_batch_loader" in code and "load_state_dict" in code
    # PYTHONPATH passes through, so a worktree's checkout is the one tested, not the installed one.
    env = {"TOKPACK_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "loss" in done.stdout
