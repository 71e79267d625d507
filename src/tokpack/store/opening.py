"""``open_tokens``: open a folder as the token source its record says it is (a pack or a
sharded dataset); it imports both, so neither imports the other's opener."""

from __future__ import annotations

from pathlib import Path

from tokpack.errors import InputError
from tokpack.store.dataset import ShardedDataset
from tokpack.store.format import DATASET_FILE, META_FILE
from tokpack.store.reader import Pack
from tokpack.store.source import TokenSource


def open_tokens(path: Path, *, verify: bool = False) -> TokenSource:
    """Open ``path`` as a pack (``meta.json``) or a sharded dataset (``dataset.json``).

    Raises:
        InputError: neither; IntegrityError: anything that does not match its record.
    """
    path = Path(path)
    if (path / DATASET_FILE).exists():
        return ShardedDataset(path, verify=verify)
    if (path / META_FILE).exists() or not path.is_dir():
        return Pack(path, verify=verify)
    raise InputError(f"{path}: neither a pack ({META_FILE}) nor a sharded dataset ({DATASET_FILE})")
