"""The format registry: every format is one module that reads it (and writes it, when tokpack
does), found by name; export and import take exactly the registered names."""

from __future__ import annotations

from pathlib import Path

import pytest

import tokpack
from tokpack.errors import InputError
from tokpack.serve.memory import pack_of_documents
from tokpack.store.formats import FORMATS, WRITTEN
from tokpack.store.importing import open_foreign


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_is_one_module_that_reads_and_writes_it(name: str) -> None:
    module = FORMATS[name].load()
    assert callable(module.read) and callable(module.recognizes)
    assert callable(getattr(module, "write", None)) == (name in WRITTEN)


def test_export_and_import_take_the_registered_names(tmp_path: Path) -> None:
    pack_of_documents([[1, 2, 3], [4, 5]], n_vocab=20, pad_id=0, directory=tmp_path / "pack")
    assert WRITTEN == ["megatron", "nanogpt", "litdata", "mds", "hf"]
    with pytest.raises(InputError, match="format must be one of megatron, nanogpt, litdata, mds, hf, got .datatrove.$"):
        tokpack.export(tmp_path / "pack", "datatrove", tmp_path / "out")
    with pytest.raises(InputError, match=f"use one of {', '.join(FORMATS)}$"):
        open_foreign(tmp_path / "pack", kind="parquet")
    for name in WRITTEN:
        tokpack.export(tmp_path / "pack", name, tmp_path / name)
        assert open_foreign(tmp_path / name).meta.schema == name
