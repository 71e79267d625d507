"""The order test files are handed to pytest-xdist's workers: the longest first.

``./dev test`` gives each worker whole files (``--dist loadfile``), in the order they were
collected, as each worker frees up. A long file that starts last keeps one worker busy while the
other has nothing left to do; started first, the short files fill in around it. Each file's
seconds in the last run are kept in pytest's cache (``.pytest_cache``), so a warm clone's next
run starts with the files that took longest; without a record (a fresh clone) the order stays as
collected. The hooks at the end are imported by ``tests/conftest.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import pytest

#: The pytest cache key of the seconds and test counts of each file's last run.
CACHE_KEY = "tokpack/file-seconds"

Item = TypeVar("Item")


def file_of(nodeid: str) -> str:
    """The file a test id belongs to (``tests/a/test_b.py::test_c[x]`` -> ``tests/a/test_b.py``).

    >>> file_of("tests/a/test_b.py::TestC::test_d[1::2]")
    'tests/a/test_b.py'
    """
    return nodeid.split("::", 1)[0]


def longest_first(items: Sequence[Item], ids: Sequence[str], record: dict[str, list[float]]) -> list[Item]:
    """``items`` (whose test ids are ``ids``) regrouped file by file, the files whose last run took
    longest first.

    A file's tests keep their order. ``record`` maps a file to ``[seconds, tests]`` of a run; a
    run of some of its tests counts in proportion to how many of today's it ran. A file with no
    record goes first (it may be long: the next run knows). Equal estimates keep the collected
    order.

    >>> ids = ["a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1"]
    >>> longest_first(ids, ids, {"a.py": [1.0, 2], "b.py": [5.0, 1]})
    ['c.py::t1', 'b.py::t1', 'a.py::t1', 'a.py::t2']
    """
    groups: dict[str, list[Item]] = {}
    for item, nodeid in zip(items, ids):
        groups.setdefault(file_of(nodeid), []).append(item)

    def estimate(file: str) -> float:
        seconds, tests = record.get(file, (float("inf"), 1))
        return seconds * len(groups[file]) / max(1.0, tests)

    return [item for file in sorted(groups, key=estimate, reverse=True) for item in groups[file]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    record = config.cache.get(CACHE_KEY, {}) if config.cache is not None else {}
    items[:] = longest_first(items, [item.nodeid for item in items], record)


#: This run's ``[seconds, tests]`` of each file.
_THIS_RUN: dict[str, list[float]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    seconds_tests = _THIS_RUN.setdefault(file_of(report.nodeid), [0.0, 0])
    seconds_tests[0] += report.duration
    seconds_tests[1] += report.when == "teardown"  # one a test, whatever its outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Written once, by the process that ran or gathered every test (never by an xdist worker).
    config = session.config
    if config.cache is not None and not hasattr(config, "workerinput") and _THIS_RUN:
        config.cache.set(CACHE_KEY, config.cache.get(CACHE_KEY, {}) | _THIS_RUN)
