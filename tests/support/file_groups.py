"""Test files that share a session fixture costly to start run on one pytest-xdist worker.

Under ``--dist loadfile`` each file is a unit of work handed to whichever worker is free, so two
files that use ``ray_cluster`` (a two-node Ray cluster, started once per test process) may each
start one. Here the files of a group are one unit: one worker runs them one after another (each
file's tests together, so module fixtures are set up once), and starts the cluster once. A file
named here that does not exist stops the run, so a rename cannot quietly undo the grouping.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

#: Group name -> the files (relative to the repository) that run on one worker.
GROUPS = {
    "ray_cluster": ("tests/engines/test_ray_cluster.py", "tests/engines/test_scale.py",
                    "tests/chess/jobs/test_chess_shards.py"),
}
_GROUP_OF = {path: group for group, paths in GROUPS.items() for path in paths}


def pytest_configure(config: pytest.Config) -> None:
    missing = [path for path in _GROUP_OF if not (Path(config.rootpath) / path).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/support/file_groups.py names files that do not exist: {', '.join(missing)}")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GroupedFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return _GROUP_OF.get(path, path)

    return GroupedFileScheduling(config, log)
