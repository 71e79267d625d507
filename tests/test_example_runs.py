"""tests/support/example_runs.py: a script run through the fork server sees what ``python SCRIPT``
would show it, and ends as it would (what the example tests rely on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")

from example_runs import run_example

# Prints what a run can see, then ends as its first argument says.
_SCRIPT = r"""
import json, os, sys, threading, time
import numpy
print(json.dumps({"argv": sys.argv, "orig_argv": sys.orig_argv[1:], "path0": sys.path[0], "cwd": os.getcwd(),
                  "random": float(numpy.random.rand()), "encoding": sys.stdout.encoding,
                  "stderr_lines": sys.stderr.line_buffering}), flush=True)
print("to stderr", file=sys.stderr)
how = sys.argv[1]
if how == "thread":  # the interpreter waits for a thread that is not a daemon before it exits
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread done", flush=True))).start()
elif how == "interrupt":
    raise KeyboardInterrupt
elif how == "killed":  # what was written before the signal is not lost on stderr
    sys.stderr.write("last words\n")
    os.kill(os.getpid(), 15)
"""


@pytest.mark.parametrize("how", ["thread", "interrupt", "killed"])
def test_a_forked_run_sees_and_ends_as_python_script_would(how: str, tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    real = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    forked = run_example(script, [how], env=env, cwd=tmp_path, timeout=120)
    assert forked.returncode == real.returncode, (forked, real)
    assert forked.stdout.splitlines()[1:] == real.stdout.splitlines()[1:]
    assert "to stderr" in forked.stderr and forked.stderr.count("\n") >= real.stderr.count("\n") > 0, (forked.stderr, real.stderr)
    seen, expected = json.loads(forked.stdout.splitlines()[0]), json.loads(real.stdout.splitlines()[0])
    again = json.loads(run_example(script, [how], env=env, cwd=tmp_path, timeout=120).stdout.splitlines()[0])
    # numpy's global generator seeded afresh in each run, as in a process of its own
    assert len({seen.pop("random"), expected.pop("random"), again.pop("random")}) == 3
    assert seen == expected == again


_RANK = r"""
import os, sys, time
print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], flush=True)
printed = os.path.join(sys.argv[2], "rank 0 printed")
if os.environ["RANK"] == "0":
    open(printed, "w").close()
else:  # after rank 0 has printed: torchrun stops it as soon as rank 1 dies
    while not os.path.exists(printed):
        time.sleep(0.01)
    os.kill(os.getpid(), int(sys.argv[1]))
time.sleep(60)  # rank 0 waits to be stopped by torchrun
"""


@pytest.mark.parametrize("number", [9, 15])
def test_torchrun_sees_a_forked_rank_killed_by_a_signal_as_such(number: int, tmp_path: Path) -> None:
    from example_runs import run_torchrun

    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    done = run_torchrun(script, [number, tmp_path], ranks=2, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 1 and sorted(done.stdout.splitlines()) == ["rank 0 of 2", "rank 1 of 2"], done
    assert f"exitcode  : -{number} " in done.stderr, done.stderr[-3000:]


def test_a_run_that_ends_before_its_pid_is_read_still_gives_its_exit_code(tmp_path: Path) -> None:
    """The server's two lines (the pid, then the exit code) may arrive in one read."""
    import socket
    import threading

    from example_runs import exit_code, start

    path = str(tmp_path / "socket")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.makefile("rb").readline()
            connection.sendall(b'{"pid": 12}\n{"code": 3}\n')

    server = threading.Thread(target=serve)
    server.start()
    connection, pid = start(path, {"argv": []})
    with connection:
        assert (pid, exit_code(connection, 10)) == (12, 3)
    server.join()
    listener.close()
