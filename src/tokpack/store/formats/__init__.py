"""Other frameworks' token formats, each one module that both reads and writes it, listed in
:data:`FORMATS`: adding a format touches its module and one line here.

A format's module has ``read(path, *, tokenizer=None, eod_id=None)`` (its files opened in place
as a token source), ``recognizes(path)`` (whether ``path`` is such files, without a tokpack
sidecar), and, when tokpack writes it, ``write(source, out, options, progress)`` (see
:mod:`tokpack.store.exporting`). Modules are imported on first use, so ``import tokpack`` pays
for none of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Format:
    """A registered format: its module in this package; a one-line description of what an export
    writes (``None``: tokpack reads it and does not write it); and whether the id after every
    document is the format's structure (nanoGPT's end-of-text: how its reader finds documents),
    which an import always removes."""

    module: str
    writes: str | None = None
    separated: bool = False

    def load(self) -> ModuleType:
        """The format's module, imported now."""
        return importlib.import_module(f"{__name__}.{self.module}")


#: Every format by name, in the order :func:`tokpack.store.importing.detect` tries their files.
FORMATS: dict[str, Format] = {
    "megatron": Format("megatron", "OUT.bin + OUT.idx for Megatron-LM's IndexedDataset"),
    "datatrove": Format("datatrove"),
    "nanogpt": Format("nanogpt", "OUT/train.bin, val.bin: flat uint16, end-of-text after each document", separated=True),
    "litdata": Format("litdata", "OUT/RANGE/: litdata chunks for StreamingDataset(item_loader=TokensLoader)"),
    "mds": Format("mds", "OUT/RANGE/: MosaicML MDS shards with a 'tokens' column"),
    "hf": Format("hf", "OUT/RANGE/*.parquet: one row per document, 'input_ids', for datasets.load_dataset"),
}

#: The formats tokpack writes, in :data:`FORMATS` order.
WRITTEN = [name for name, fmt in FORMATS.items() if fmt.writes is not None]

__all__ = ["FORMATS", "WRITTEN", "Format"]
