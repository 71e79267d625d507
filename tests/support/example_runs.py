"""The repository's example scripts run as a user runs them (``python examples/NAME.py ARGS``),
each run a new process forked from one that has already imported torch.

The examples train with ``torch.optim``, whose first use imports ``torch._dynamo``: with torch
itself that is most of a short run's CPU, paid again by every run. A process per test worker (per
``PYTHONPATH`` and thread settings, which torch reads at import) imports torch once and forks a
child for each run. The child is ``python SCRIPT ARGS`` in everything the script can see: its
argv, environment and working folder, ``__main__``, ``sys.path[0]`` the script's folder, stdin
empty, stdout and stderr captured, the exit code Python would give (``sys.exit``, an uncaught
exception's traceback and 1), atexit handlers run; only torch is already in ``sys.modules``
(tokpack is imported by the run itself, so it reads the run's environment). Runs under
``torchrun`` stay real ``torchrun`` processes.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

#: What torch reads when it is imported: a run whose environment differs in one of these gets a
#: process of its own.
_IMPORT_TIME = ("PYTHONPATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED")

_FORK_SERVER = r"""
import atexit, json, os, runpy, sys, traceback
import torch, torch._dynamo  # the imports every run shares

def run(request):
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_TRUNC),
                            (2, request["stderr"], os.O_WRONLY | os.O_TRUNC)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = sys.__stdin__ = open(0, closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", closefd=False, errors="backslashreplace")
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
    code = 0
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exit:
        if exit.code is None:
            code = 0
        elif isinstance(exit.code, int):
            code = exit.code
        else:
            print(exit.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        run(request)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
"""

class _ForkServer:
    """One process that has imported torch and forks a child for each run it is sent."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _FORK_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        bufsize=0, env=dict(env))
        self.unread = b""

    def send(self, request: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")

    def reply(self, timeout: float) -> dict[str, int]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self.unread:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise subprocess.TimeoutExpired("example run", timeout)
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"the example runs' fork server exited with {self.process.wait()}")
            self.unread += chunk
        line, self.unread = self.unread.split(b"\n", 1)
        reply: dict[str, int] = json.loads(line)
        return reply


_servers: dict[tuple[str | None, ...], _ForkServer] = {}


def run_example(script: Path, arguments: Sequence[object], *, env: Mapping[str, str], cwd: Path | None = None,
                timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, script, *arguments], capture_output=True, text=True, env=env)``,
    forked from a process that has imported torch; raises ``subprocess.TimeoutExpired`` (the
    run killed) after ``timeout`` seconds."""
    argv = [str(script), *map(str, arguments)]
    key = tuple(env.get(name) for name in _IMPORT_TIME)
    server = _servers.get(key)
    if server is None or server.process.poll() is not None:
        server = _servers[key] = _ForkServer(env)
    with tempfile.TemporaryDirectory(prefix="example-run-") as folder:
        stdout, stderr = Path(folder) / "stdout", Path(folder) / "stderr"
        stdout.touch()
        stderr.touch()
        server.send({"argv": argv, "env": dict(env), "cwd": str(cwd or Path.cwd()), "stdout": str(stdout), "stderr": str(stderr)})
        pid = server.reply(timeout)["pid"]
        try:
            code = server.reply(timeout)["code"]
        except subprocess.TimeoutExpired:
            os.kill(pid, 9)
            server.reply(60)
            raise subprocess.TimeoutExpired([sys.executable, *argv], timeout) from None
        return subprocess.CompletedProcess([sys.executable, *argv], code, stdout.read_text(errors="replace"),
                                           stderr.read_text(errors="replace"))


@atexit.register
def _stop() -> None:
    for server in _servers.values():
        if server.process.stdin is not None:
            server.process.stdin.close()
        try:
            server.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.process.kill()
