"""What ``run_torchrun`` has torchrun start as each rank: ``python -u forked_rank.py SCRIPT ARGS``.

It asks the fork server named in its environment (``example_runs.SERVER_VARIABLE``) for
``python SCRIPT ARGS`` with the environment, folder, stdout and stderr torchrun gave it, passes
torchrun's signals on, and exits as the rank exited; it dies with torchrun, and the rank with it.
Without a server, or with one whose torch was imported under other settings, it becomes
``python -u SCRIPT ARGS`` itself.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

from example_runs import IMPORT_TIME, SERVER_VARIABLE, exit_code, start

_PR_SET_PDEATHSIG = 1


def main() -> None:
    script, *arguments = sys.argv[1:]
    environment = dict(os.environ)
    server = json.loads(environment.pop(SERVER_VARIABLE, "null"))
    if server is None or server["import_time"] != {name: environment.get(name) for name in IMPORT_TIME}:
        os.execv(sys.executable, [sys.executable, "-u", script, *arguments])
    launcher = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != launcher:  # torchrun died before the line above
        sys.exit(1)
    connection, pid = start(server["socket"], {"argv": [script, *arguments], "env": environment, "cwd": os.getcwd(),
                                               "stdout": f"/proc/{os.getpid()}/fd/1",
                                               "stderr": f"/proc/{os.getpid()}/fd/2", "unbuffered": True})
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda received, _: os.kill(pid, received))
    code = exit_code(connection, None)
    if code < 0:  # killed by a signal: end the same way, as torchrun expects of its rank
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # whose handling cannot be set (nor changed)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main()
