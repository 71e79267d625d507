"""What numpy reads of a ``tokens.npy`` is what was checked: its header is the one a pack's
record implies, so a shorter header followed by chosen ids cannot shift the stream past the
checksum, for a remote shard as it downloads, for its cached copy, and for a local pack."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from tokpack.errors import IntegrityError
from tokpack.serve.memory import pack_of_documents
from tokpack.store import Pack, write_dataset
from tokpack.store.format import DocumentCut, Source
from tokpack.store.remote import open_remote

CHOSEN = np.full(16, 7, dtype="<u2")


def forge_header(path: Path) -> None:
    """Rewrite ``path`` with a 96-byte header and 16 chosen ids before the genuine payload: the
    same size, and bytes 128 onwards unchanged, so a hash from byte 128 still matches."""
    data = path.read_bytes()
    header_length = int.from_bytes(data[8:10], "little")
    fields = ast.literal_eval(data[10 : 10 + header_length].decode("latin-1"))
    text = repr(fields).encode("latin-1")
    text = text + b" " * (96 - 10 - 1 - len(text)) + b"\n"
    forged = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + CHOSEN.tobytes() + data[128:]
    assert len(forged) == len(data) and forged[128:] == data[128:]
    path.write_bytes(forged)
    assert np.array_equal(np.load(path, mmap_mode="r")[:16], CHOSEN)  # what numpy serves from it


def make_dataset(folder: Path) -> Path:
    documents = [[1 + (i * 5 + j) % 40 for j in range(3 + i % 7)] for i in range(30)]
    for rank in range(2):
        pack_of_documents(documents[rank * 15 : (rank + 1) * 15], n_vocab=50, pad_id=0, directory=folder / f"shard-0000{rank}")
    write_dataset(folder, ["shard-00000", "shard-00001"], source=Source(name="t", sha256="0" * 64, n_bytes=0),
                  cut=DocumentCut(rule="list"))
    return folder


def test_a_remote_shard_with_a_forged_header_is_refused_as_it_downloads(tmp_path: Path) -> None:
    """numpy reads the ids from where the file's own header ends: a 96-byte header then 16
    chosen ids before the genuine payload would hash like the genuine file from byte 128 and
    serve the chosen ids, the stream shifted by 16. The download refuses it."""
    dataset = make_dataset(tmp_path / "ds")
    forge_header(dataset / "shard-00001" / "tokens.npy")
    remote = open_remote(f"file://{dataset}", cache_dir=tmp_path / "cache")
    with pytest.raises(IntegrityError, match=r"shard-00001/tokens\.npy: its \.npy header is not the one"):
        remote.read_span(int(remote.offsets[1]), int(remote.offsets[1]) + 16)
    assert not list((tmp_path / "cache").rglob("shard-00001/tokens.npy*"))  # nothing forged is kept


def test_a_cached_copy_with_a_forged_header_is_fetched_again(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "ds")
    expected = np.asarray(Pack(dataset / "shard-00001").tokens[:16])
    remote = open_remote(f"file://{dataset}", cache_dir=tmp_path / "cache")
    first = int(remote.offsets[1])
    assert np.array_equal(remote.read_span(first, first + 16), expected)
    (cached,) = (tmp_path / "cache").rglob("shard-00001/tokens.npy")
    forge_header(cached)
    again = open_remote(f"file://{dataset}", cache_dir=tmp_path / "cache")
    assert np.array_equal(again.read_span(first, first + 16), expected)


def test_a_local_pack_with_a_forged_header_is_refused_on_every_open(tmp_path: Path) -> None:
    pack = pack_of_documents([[1, 2, 3, 4, 5]] * 20, n_vocab=10, pad_id=0, directory=tmp_path / "pack")
    Pack(pack)
    forge_header(pack / "tokens.npy")
    for verify in (None, True, False):
        with pytest.raises(IntegrityError, match=r"tokens\.npy: its \.npy header is not the one"):
            Pack(pack, verify=verify)
