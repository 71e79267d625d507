"""The repository's example scripts run as a user runs them (``python examples/NAME.py ARGS``, or
``torchrun --nproc_per_node N examples/NAME.py ARGS``), each process forked from one that has
already imported torch.

The examples train with ``torch.optim``, whose first use imports ``torch._dynamo``: with torch
itself that is most of a short run's CPU, paid again by every process (a two-rank ``torchrun`` is
three: the launcher and two ranks). A fork server per test worker (per ``PYTHONPATH`` and thread
settings, which torch reads at import) imports torch once and forks a child for each process. The
child is ``python SCRIPT ARGS`` (or ``python -m MODULE ARGS``) in everything the script can see:
its argv, environment and working folder, ``__main__``, ``sys.path[0]``, stdin empty, stdout and
stderr where the caller's go, the exit code Python would give (``sys.exit``, an uncaught
exception's traceback and 1, an uncaught KeyboardInterrupt's or a signal's death), stdout and
stderr buffered as Python buffers them, threads that are not daemons waited for and atexit handlers
run at the end, numpy's global generator seeded afresh. What differs: torch (and what it imports)
is already in ``sys.modules`` (tokpack is imported by the run itself, so it reads the run's
environment), every run of a server shares its string hash seed, and a traceback shows runpy's
frames above the script's.

``torchrun`` is the real launcher, forked so; each rank it starts is ``python -u forked_rank.py
SCRIPT ARGS``, a small process that has the server fork the rank with the environment torchrun gave
it, forwards torchrun's signals to it, and exits as it exited (or, without a server that matches
its environment, becomes ``python SCRIPT ARGS`` itself). Each forked process dies with the process
that asked for it.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

#: What torch reads when it is imported: a run whose environment differs in one of these gets a
#: server of its own.
IMPORT_TIME = ("PYTHONPATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED")
#: The environment variable naming the server's socket, for the ranks torchrun starts.
SERVER_VARIABLE = "TOKPACK_TESTS_FORK_SERVER"
FORKED_RANK = Path(__file__).with_name("forked_rank.py")

# The server: accepts a connection per process to start; a handler forked for it forks the process,
# says its pid, then waits for whichever comes first: the process's end (its exit status is sent)
# or the connection's (the asker died: the process is killed). It exits when its stdin closes.
_FORK_SERVER = r"""
import atexit, io, json, os, runpy, select, signal, socket, sys, threading, traceback
import torch, torch._dynamo  # the imports every run shares
ENCODING = sys.stdout.encoding

def run(request):
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_APPEND),
                            (2, request["stderr"], os.O_WRONLY | os.O_APPEND)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    # As Python makes them: stdout buffered (unless -u or PYTHONUNBUFFERED), stderr line by line
    unbuffered = bool(request.get("unbuffered") or os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = open(0, closefd=False, encoding=ENCODING)
    for fd, name, errors in ((1, "stdout", "strict"), (2, "stderr", "backslashreplace")):
        binary = open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False)
        stream = io.TextIOWrapper(binary, ENCODING, errors, line_buffering=not unbuffered and fd == 2,
                                  write_through=unbuffered)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    sys.argv = list(request["argv"])
    flags = ["-u"] if request.get("unbuffered") else []
    sys.orig_argv = [sys.executable, *flags, *(["-m", request["module"], *sys.argv[1:]] if request.get("module") else sys.argv)]
    if "numpy" in sys.modules:  # its global generator was seeded in the server: each process its own, as unforked
        sys.modules["numpy"].random.seed()
    code = 0
    try:
        if request.get("module"):
            sys.path[0] = request["cwd"]
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exit:
        if exit.code is None:
            code = 0
        elif isinstance(exit.code, int):
            code = exit.code
        else:
            print(exit.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT  # Python ends an uncaught KeyboardInterrupt by SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()  # what Python's exit does first: wait for the threads that are not daemons
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code)

def handle(connection):
    request = json.loads(connection.makefile("rb").readline())
    pid = os.fork()
    if pid == 0:
        connection.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        run(request)
    connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    ended = os.pidfd_open(pid)
    while True:
        ready, _, _ = select.select([connection, ended], [], [])
        if ended in ready:
            _, status = os.waitpid(pid, 0)
            connection.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            return
        if not connection.recv(1):  # the asker is gone
            os.kill(pid, signal.SIGKILL)

listener = socket.socket(socket.AF_UNIX)
listener.bind(sys.argv[1])
listener.listen(64)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped as they end
print("ready", flush=True)
while True:
    ready, _, _ = select.select([listener, sys.stdin], [], [])
    if sys.stdin in ready and not os.read(0, 1):
        break
    if listener in ready:
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                handle(connection)
            finally:
                os._exit(0)
        connection.close()
"""


class _ForkServer:
    """One process that has imported torch and forks a child for each process it is asked for."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="fork-server-")
        self.path = os.path.join(self.folder, "socket")
        self.process = subprocess.Popen([sys.executable, "-c", _FORK_SERVER, self.path], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=dict(env))
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the example runs' fork server exited with {self.process.wait()}")

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


_servers: dict[tuple[str | None, ...], _ForkServer] = {}


def server_for(env: Mapping[str, str]) -> dict[str, object]:
    """A fork server whose torch was imported in ``env``'s import-time settings: its socket and
    those settings (what ``SERVER_VARIABLE`` holds, as JSON)."""
    settings = {name: env.get(name) for name in IMPORT_TIME}
    key = tuple(settings.values())
    server = _servers.get(key)
    if server is None or server.process.poll() is not None:
        server = _servers[key] = _ForkServer(env)
    return {"socket": server.path, "import_time": settings}


def start(path: object, request: dict[str, object]) -> tuple[socket.socket, int]:
    """Ask the server at ``path`` for a process; return the connection (closing it kills the
    process) and the process's id."""
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(path)
    connection.sendall(json.dumps(request).encode() + b"\n")
    return connection, int(json.loads(_line(connection, None))["pid"])


def exit_code(connection: socket.socket, timeout: float | None) -> int:
    """The process's exit code (``-N``: killed by signal N); ``socket.timeout`` after ``timeout``."""
    return int(json.loads(_line(connection, timeout))["code"])


def _line(connection: socket.socket, timeout: float | None) -> bytes:
    connection.settimeout(timeout)
    received = b""
    while not received.endswith(b"\n"):
        chunk = connection.recv(1)  # a byte at a time: the exit code's line may follow the pid's at once
        if not chunk:
            raise RuntimeError("the example runs' fork server closed the connection")
        received += chunk
    return received


def _forked(argv: list[str], *, env: Mapping[str, str], cwd: Path | None, timeout: float,
            module: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, *(["-m", module] if module else []), *argv[bool(module):]]
    with tempfile.TemporaryDirectory(prefix="example-run-") as folder:
        stdout, stderr = Path(folder) / "stdout", Path(folder) / "stderr"
        stdout.touch()
        stderr.touch()
        request = {"argv": argv, "module": module, "env": dict(env), "cwd": str(cwd or Path.cwd()),
                   "stdout": str(stdout), "stderr": str(stderr)}
        connection, _ = start(server_for(env)["socket"], request)
        with connection:
            try:
                code = exit_code(connection, timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(command, timeout) from None  # closing the connection kills it
        return subprocess.CompletedProcess(command, code, stdout.read_text(errors="replace"),
                                           stderr.read_text(errors="replace"))


def run_example(script: Path, arguments: Sequence[object], *, env: Mapping[str, str], cwd: Path | None = None,
                timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, script, *arguments], capture_output=True, text=True, env=env)``,
    forked from a process that has imported torch; raises ``subprocess.TimeoutExpired`` (the
    run killed) after ``timeout`` seconds."""
    return _forked([str(script), *map(str, arguments)], env=env, cwd=cwd, timeout=timeout)


def run_torchrun(script: Path, arguments: Sequence[object], *, ranks: int, env: Mapping[str, str],
                 cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, torch.distributed.run, --standalone, --nproc_per_node=RANKS,
    script, *arguments], capture_output=True, text=True, env=env)``, the launcher and its ranks
    forked from a process that has imported torch (``--standalone``: a free local port, so
    parallel test runs never collide)."""
    env = {**env, SERVER_VARIABLE: json.dumps(server_for(env))}
    # argv[0] becomes the module's file, as with python -m
    argv = ["torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", str(FORKED_RANK), str(script),
            *map(str, arguments)]
    return _forked(argv, env=env, cwd=cwd, timeout=timeout, module="torch.distributed.run")


@atexit.register
def _stop() -> None:
    for server in _servers.values():
        server.stop()
