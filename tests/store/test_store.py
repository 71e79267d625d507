"""The pack store: byte-stable files, refusals of anything that does not match meta.json."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from tokpack.serve.memory import pack_of_documents
from tokpack.store import DocumentCut, Pack, PackWriter, Source
from tokpack.vocab import VocabIdentity

DOCUMENTS = [[5, 6, 7], [1], [2, 3, 4, 8, 9], [0, 0]]


def file_hashes(pack: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted(pack.iterdir())}


def test_small_pack_is_byte_stable(tmp_path: Path) -> None:
    pack = pack_of_documents(DOCUMENTS, n_vocab=10, directory=tmp_path / "pack", train_documents=3)
    for name, array in (("tokens.npy", np.array(sum(DOCUMENTS, []), "<u2")), ("starts.npy", np.array([0, 3, 4, 9], "<i8"))):
        expected = io.BytesIO()
        np.save(expected, array)
        assert (pack / name).read_bytes() == expected.getvalue()  # exactly what numpy itself writes
    # Pinned: a change to any of the three files' bytes is a format change and must be deliberate.
    assert file_hashes(pack) == {
        "meta.json": "9e4d224b9a17f5e8",
        "starts.npy": "615d977cb3ad2f51",
        "tokens.npy": "9f0b35fc54068240",
    }


def test_layout_reads_with_plain_numpy(tmp_path: Path) -> None:
    pack = pack_of_documents(DOCUMENTS, n_vocab=10, directory=tmp_path / "pack", train_documents=3)
    tokens = np.load(pack / "tokens.npy", mmap_mode="r", allow_pickle=False)
    starts = np.load(pack / "starts.npy", allow_pickle=False)
    assert tokens.dtype == np.uint16 and tokens.tolist() == sum(DOCUMENTS, [])
    assert starts.dtype == np.int64 and starts.tolist() == [0, 3, 4, 9]
    meta = json.loads((pack / "meta.json").read_text())
    assert meta["schema"] == "tokpack.pack.v1" and (meta["n_docs"], meta["n_tokens"]) == (4, 11)
    assert meta["ranges"]["train"]["tokens"] == [0, 9] and meta["ranges"]["validation"]["documents"] == [3, 4]
    opened = Pack(pack, verify=True)
    assert opened.document(2).tolist() == [2, 3, 4, 8, 9]
    assert opened.document_bounds().tolist() == [[0, 3], [3, 4], [4, 9], [9, 11]]


def test_wide_vocabulary_uses_uint32(tmp_path: Path) -> None:
    pack = pack_of_documents([[70_000, 1]], n_vocab=70_001, directory=tmp_path / "pack")
    assert Pack(pack, verify=True).tokens.dtype == np.uint32


def test_empty_documents_are_skipped_and_empty_pack_opens(tmp_path: Path) -> None:
    assert Pack(pack_of_documents([[], [3], []], n_vocab=4, directory=tmp_path / "a")).starts.tolist() == [0]
    empty = Pack(pack_of_documents([], n_vocab=4, directory=tmp_path / "b"), verify=True)
    assert (empty.n_docs, empty.n_tokens) == (0, 0)


def test_writer_refuses_ids_outside_the_vocabulary_and_leaves_nothing(tmp_path: Path) -> None:
    identity = VocabIdentity(scheme="t", sha256="a" * 64, n_vocab=4)
    with pytest.raises(ValueError, match="id 4 is outside"):
        with PackWriter(tmp_path / "pack", vocabulary=identity) as writer:
            writer.add_documents([[1, 2], [4]])
    assert list(tmp_path.iterdir()) == []


def test_writer_never_overwrites(tmp_path: Path) -> None:
    pack = pack_of_documents([[1]], n_vocab=4, directory=tmp_path / "pack")
    identity = VocabIdentity(scheme="t", sha256="a" * 64, n_vocab=4)
    with pytest.raises(ValueError, match="already exists"):
        PackWriter(pack, vocabulary=identity)


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    return pack_of_documents([list(range(1, 200)), [7] * 50], n_vocab=300, directory=tmp_path / "pack")


def test_truncated_tokens_are_refused_on_open(pack: Path) -> None:
    path = pack / "tokens.npy"
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(ValueError, match=r"tokens\.npy: .* bytes, expected"):
        Pack(pack)


def test_edited_tokens_are_refused_by_verify(pack: Path) -> None:
    path = pack / "tokens.npy"
    data = bytearray(path.read_bytes())
    data[200] ^= 1
    path.write_bytes(bytes(data))
    Pack(pack, verify=False)  # sizes still match: only the checksum can tell
    for verify in (None, True):  # the default open verifies too (the file changed since any stamp)
        with pytest.raises(ValueError, match=r"tokens\.npy: SHA-256 differs"):
            Pack(pack, verify=verify)


def test_starts_out_of_range_are_refused(pack: Path) -> None:
    path = pack / "starts.npy"
    starts = np.load(path)
    for bad, message in (([0, 10_000], "past the end"), ([3, 199], "not 0"), ([0, 0], "strictly increasing")):
        path.write_bytes(path.read_bytes()[:128] + np.asarray(bad, "<i8").tobytes())
        with pytest.raises(ValueError, match=message):
            Pack(pack)
    path.write_bytes(path.read_bytes()[:128] + starts.astype("<i8").tobytes())
    Pack(pack, verify=True)


def test_hand_edited_meta_is_refused(pack: Path) -> None:
    path = pack / "meta.json"
    original = path.read_text()
    meta = json.loads(original)
    meta["vocabulary"]["n_vocab"] = 301
    path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="seal mismatch"):
        Pack(pack)
    meta = json.loads(original) | {"surprise": 1}
    path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="surprise"):
        Pack(pack)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="meta.json"):
        Pack(pack)


def test_missing_files_are_named(pack: Path) -> None:
    (pack / "starts.npy").unlink()
    with pytest.raises(ValueError, match=r"starts\.npy: missing"):
        Pack(pack)


def test_no_code_loads_arrays_with_pickle() -> None:
    source = Path(__file__).resolve().parents[2] / "src"
    offenders = [p for p in source.rglob("*.py") if "allow_pickle=True" in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_commit_records_source_and_cut(tmp_path: Path) -> None:
    identity = VocabIdentity(scheme="t", sha256="a" * 64, n_vocab=4)
    with PackWriter(tmp_path / "pack", vocabulary=identity) as writer:
        writer.add_documents([np.array([1, 2, 3], dtype=np.int64)])
        meta = writer.commit(source=Source(name="x.txt", sha256="b" * 64, n_bytes=9),
                             cut=DocumentCut(rule="newline", document_bytes=64), counts={"n_games": 1})
    assert Pack(tmp_path / "pack").meta == meta and meta.counts == {"n_games": 1}


def test_padding_id_must_never_be_a_real_token(tmp_path: Path) -> None:
    Pack(pack_of_documents([[1, 2]], n_vocab=4, directory=tmp_path / "ok", pad_id=3), verify=True)
    with pytest.raises(ValueError, match="padding id 2 occurs 1 times"):
        Pack(pack_of_documents([[1, 2]], n_vocab=4, directory=tmp_path / "bad", pad_id=2), verify=True)
    with pytest.raises(ValueError, match="pad_id 4 is outside"):
        pack_of_documents([[1]], n_vocab=4, directory=tmp_path / "out", pad_id=4)


def test_flat_documents_write_the_same_pack_as_lists(tmp_path: Path) -> None:
    identity = VocabIdentity(scheme="t", sha256="a" * 64, n_vocab=10)
    source = Source(name="x", sha256="b" * 64, n_bytes=0)
    for name, add in (("lists", lambda w: w.add_documents(DOCUMENTS)),
                      ("flat", lambda w: w.add_flat(np.array(sum(DOCUMENTS, []), np.uint32), [3, 1, 0, 5, 2]))):
        with PackWriter(tmp_path / name, vocabulary=identity) as writer:
            add(writer)
            writer.commit(source=source, cut=DocumentCut(rule="t"))
    assert file_hashes(tmp_path / "lists") == file_hashes(tmp_path / "flat")
    with pytest.raises(ValueError, match="add up to 4"):
        with PackWriter(tmp_path / "bad", vocabulary=identity) as writer:
            writer.add_flat(np.array([1, 2, 3]), [2, 2])
