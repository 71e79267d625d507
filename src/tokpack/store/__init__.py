"""The pack store: the on-disk format, its streaming writer, its verifying reader, and sharded
datasets read as one stream.

Each name is imported from its module on first use (PEP 562), as ``tokpack`` does: writing or
reading one pack (``prepare``) loads neither the sharded datasets' module nor the foreign formats'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokpack._lazy import lazy_attributes

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


__getattr__, __dir__ = lazy_attributes(globals(), _HOMES)
