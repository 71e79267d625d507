"""The pack store: the on-disk format, its streaming writer, its verifying reader, and sharded
datasets read as one stream."""

from tokpack.store.dataset import DatasetRecord, ShardedDataset, merge_dataset, write_dataset
from tokpack.store.format import DocumentCut, PackMeta, Source, Span, token_dtype
from tokpack.store.formats.datatrove import DatatroveFolder
from tokpack.store.opening import open_tokens
from tokpack.store.reader import Pack
from tokpack.store.source import TokenSource
from tokpack.store.writer import PackWriter

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
