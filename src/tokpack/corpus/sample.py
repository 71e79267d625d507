"""The sample corpus shipped inside the package, for the demo, examples and tests."""

from __future__ import annotations

from pathlib import Path


def sample_corpus() -> Path:
    """Path of the bundled ~300 KB Polish sample (``polish.txt``, with its ``manifest.json``
    and ``SOURCES.md`` beside it: Wesnoth and Freeciv texts, GPL-2+).

    >>> sample_corpus().name
    'polish.txt'
    """
    from importlib import resources  # here: importing it imports much that prepare does not need

    return Path(str(resources.files("tokpack") / "sample" / "polish.txt"))
