"""Test files in the order of their last run's seconds, longest first.

pytest-xdist's ``--dist loadfile`` hands whole files to its workers in collection order; in
pytest's own order a long file collected late can leave one worker running it while the other has
nothing left. Longest first, the run ends on short files. Each file's seconds (setup, call and
teardown of its tests) are kept in pytest's cache and updated by every run for the files it ran;
a file not timed yet goes first. Without the cache (``-p no:cacheprovider``) the order is pytest's.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

KEY = "tokpack/file-seconds"
_seconds: defaultdict[str, float] = defaultdict(float)


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)
    if cache is None:
        return
    last = cache.get(KEY, {})
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(_file(item.nodeid), index)
    # A stable sort: a file's tests keep their order, and files of equal seconds pytest's.
    items.sort(key=lambda item: (-last.get(_file(item.nodeid), math.inf), first_seen[_file(item.nodeid)]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[_file(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _seconds:
        return  # an xdist worker: the controller hears every report and writes once
    cache.set(KEY, {**cache.get(KEY, {}), **{name: round(seconds, 2) for name, seconds in _seconds.items()}})
