"""``open_tokens``: open a folder as the token source its record says it is (a pack, a sharded
dataset, or another framework's files that tokpack exported); it imports the readers, so none of
them imports another's opener."""

from __future__ import annotations

import os
from pathlib import Path

from tokpack.errors import InputError
from tokpack.store.dataset import ShardedDataset
from tokpack.store.format import DATASET_FILE, META_FILE
from tokpack.store.reader import Pack
from tokpack.store.source import TokenSource


def open_tokens(path: Path, *, verify: bool | None = None) -> TokenSource:
    """Open ``path`` as a pack (``meta.json``), a sharded dataset (``dataset.json``), or another
    framework's files that tokpack exported (Megatron ``.bin/.idx``, nanoGPT ``.bin``; see
    :mod:`tokpack.store.importing`).

    ``verify``: ``None`` verifies checksums on the first open (a dataset: each shard when it is
    first read) and trusts a verification stamp after that; ``True`` verifies everything now;
    ``False`` checks counts, sizes and seals only.

    Raises:
        InputError / IntegrityError: neither, or anything that does not match its record.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"path must be a pack or dataset directory, got {type(path).__name__}")
    if verify is not None and not isinstance(verify, bool):
        raise InputError(f"verify must be True, False or None, got {verify!r}")
    path = Path(path)
    if (path / DATASET_FILE).exists():
        return ShardedDataset(path, verify=verify)
    if not (path / META_FILE).exists():
        # Another framework's files (Megatron, nanoGPT, datatrove): readable here when a tokpack
        # export's sidecar names their vocabulary (else the error asks for the tokenizer).
        from tokpack.store.importing import detect, open_foreign

        try:
            kind = detect(path)
        except InputError:
            kind = None
        if kind is not None:
            return open_foreign(path, kind=kind, verify=verify)
    if (path / META_FILE).exists() or not path.is_dir():
        return Pack(path, verify=verify)
    raise InputError(f"neither a pack ({META_FILE}) nor a sharded dataset ({DATASET_FILE})", where=path)
