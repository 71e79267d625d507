"""The pack store: the on-disk format, its streaming writer, its verifying reader, and sharded
datasets read as one stream.

Each name is imported from its module on first use (PEP 562), as ``tokpack`` does: writing or
reading one pack (``prepare``) loads neither the sharded datasets' module nor the foreign formats'.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokpack.store.dataset import DatasetRecord, ShardedDataset, merge_dataset, write_dataset
    from tokpack.store.format import DocumentCut, PackMeta, Source, Span, token_dtype
    from tokpack.store.formats.datatrove import DatatroveFolder
    from tokpack.store.opening import open_tokens
    from tokpack.store.reader import Pack
    from tokpack.store.source import TokenSource
    from tokpack.store.writer import PackWriter

#: Where each public name lives: ``tokpack.store.NAME`` imports that module on first use.
_HOMES = {
    "DatatroveFolder": "tokpack.store.formats.datatrove",
    "DatasetRecord": "tokpack.store.dataset",
    "DocumentCut": "tokpack.store.format",
    "Pack": "tokpack.store.reader",
    "PackMeta": "tokpack.store.format",
    "PackWriter": "tokpack.store.writer",
    "ShardedDataset": "tokpack.store.dataset",
    "Source": "tokpack.store.format",
    "Span": "tokpack.store.format",
    "TokenSource": "tokpack.store.source",
    "merge_dataset": "tokpack.store.dataset",
    "open_tokens": "tokpack.store.opening",
    "token_dtype": "tokpack.store.format",
    "write_dataset": "tokpack.store.dataset",
}

__all__ = [
    "DatatroveFolder",
    "DatasetRecord",
    "DocumentCut",
    "Pack",
    "PackMeta",
    "PackWriter",
    "ShardedDataset",
    "Source",
    "Span",
    "TokenSource",
    "merge_dataset",
    "open_tokens",
    "token_dtype",
    "write_dataset",
]


def __getattr__(name: str) -> Any:
    """``tokpack.store.NAME``: the public name from its module, imported now (then kept here)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tokpack.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
