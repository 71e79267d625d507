"""Packs and sharded datasets on object storage (any fsspec URL), read through a bounded,
verified local cache; exports and datasets uploaded so that a half-uploaded one never opens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokpack.store.source import TokenSource, open_tokens


def is_url(path: str | Path) -> bool:
    """Whether ``path`` is a URL (``s3://…``, ``file://…``) rather than a local path.

    >>> is_url("s3://bucket/data"), is_url("/tmp/data")
    (True, False)
    """
    return "://" in str(path)


def open_source(path: str | Path, *, storage_options: dict[str, Any] | None = None, verify: bool = False) -> TokenSource:
    """Open a pack or sharded dataset, local or at a URL."""
    if is_url(path):
        return open_remote(str(path), storage_options=storage_options, verify=verify)
    return open_tokens(Path(path), verify=verify)
