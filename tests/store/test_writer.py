"""The pack writer: what it accepts gives a pack that passes a full verification, and what it
refuses it refuses with an :class:`InputError` before writing anything; a writer that can vouch
for what it wrote leaves the verification stamp a first open would leave (so that open does not
hash the files again), and only then; ``add_documents`` joins a batch straight into the pack's
dtype with the bytes and refusals of ``add_flat``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokpack.errors import InputError, IntegrityError
from tokpack.store import DocumentCut, Pack, PackWriter, Source
from tokpack.vocab.identity import VocabIdentity

VOCABULARY = VocabIdentity(scheme="demo", sha256="0" * 64, n_vocab=50)
SOURCE = Source(name="demo.txt", sha256="1" * 64, n_bytes=5)


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Verification stamps go to this test's own cache."""
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))
    return tmp_path / "stamps"


def write(target: Path, documents: list[list[int]], *, pad_id: int | None, stamp_verified: bool = True) -> Path:
    with PackWriter(target, vocabulary=VOCABULARY) as writer:
        writer.add_documents(documents)
        writer.commit(source=SOURCE, cut=DocumentCut(rule="demo"), pad_id=pad_id, stamp_verified=stamp_verified)
    return target


def verifications(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = Pack.verify
    monkeypatch.setattr(Pack, "verify", lambda self, **kw: calls.append(1) or real(self, **kw))
    return calls


def test_a_pack_the_writer_vouches_for_is_not_hashed_again_on_its_first_open(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pack = write(tmp_path / "pack", [[1, 2, 3], [4, 5]], pad_id=49)
    calls = verifications(monkeypatch)
    opened = Pack(pack)
    assert calls == [] and opened.n_tokens == 5 and opened.stamped()


def test_a_vouched_pack_altered_afterwards_is_still_refused(tmp_path: Path) -> None:
    pack = write(tmp_path / "pack", [[1, 2, 3], [4, 5]], pad_id=49)
    tokens = pack / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-1] ^= 0x01
    tokens.write_bytes(bytes(data))
    status = tokens.stat()
    # Another modification time than the stamp's, whatever the file system's clock tick.
    import os

    os.utime(tokens, ns=(status.st_atime_ns, status.st_mtime_ns + 1_000_000_000))
    with pytest.raises(IntegrityError, match=r"tokens\.npy: SHA-256 differs"):
        Pack(pack)


def test_a_padding_id_within_the_ids_range_leaves_the_check_to_the_first_open(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pack = write(tmp_path / "pack", [[1, 2, 3], [4, 5]], pad_id=2)  # 2 occurs: the writer cannot vouch
    calls = verifications(monkeypatch)
    with pytest.raises(IntegrityError, match="the padding id 2 occurs 1 times"):
        Pack(pack)
    assert calls == [1]


def test_no_stamp_unless_asked_and_none_after_a_whole_pack_was_appended(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    plain = write(tmp_path / "plain", [[1, 2, 3]], pad_id=49, stamp_verified=False)
    source = write(tmp_path / "source", [[6, 7]], pad_id=49)
    with PackWriter(tmp_path / "joined", vocabulary=VOCABULARY) as writer:
        writer.add_documents([[1, 2]])
        writer.append_pack(Pack(source))
        writer.commit(source=SOURCE, cut=DocumentCut(rule="demo"), pad_id=49, stamp_verified=True)
    calls = verifications(monkeypatch)
    Pack(plain)
    Pack(tmp_path / "joined")
    assert calls == [1, 1]


def test_a_carried_vocabulary_of_another_identity_is_refused_when_vouching(tmp_path: Path) -> None:
    from tokpack.vocab import BpeTokenizer

    other = BpeTokenizer(ranks={bytes([b]): b for b in range(256)})
    with PackWriter(tmp_path / "pack", vocabulary=VOCABULARY) as writer:
        writer.add_vocabulary_files(other.files())
        writer.add_documents([[1, 2]])
        with pytest.raises(IntegrityError, match="records the vocabulary"):
            writer.commit(source=SOURCE, cut=DocumentCut(rule="demo"), pad_id=49, stamp_verified=True)


def test_files_made_from_the_packs_vocabulary_are_not_read_back_and_given_ones_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``add_vocabulary`` makes the carried files from the pack's own vocabulary (and hashes the
    bytes it writes), so the stamp needs no second reading of them; files given as bytes, or a
    padding id that is no special token of that vocabulary, are checked as an open checks them."""
    from tokpack.vocab import BpeTokenizer

    tokenizer = BpeTokenizer(ranks={bytes([b]): b for b in range(256)})
    checked: list[Path] = []
    real = Pack.verify_vocabulary_files
    monkeypatch.setattr(Pack, "verify_vocabulary_files", lambda self: checked.append(self.path) or real(self))
    eot = tokenizer.eot_id

    def commit(target: Path, add: object, pad_id: int) -> Path:
        with PackWriter(target, vocabulary=tokenizer.identity) as writer:
            add(writer)  # type: ignore[operator]
            writer.add_documents([[1, 2, 3]])
            writer.commit(source=SOURCE, cut=DocumentCut(rule="demo"), pad_id=pad_id, stamp_verified=True)
        return target

    made = commit(tmp_path / "made", lambda writer: writer.add_vocabulary(tokenizer), eot)
    assert checked == [] and Pack(made).stamped()
    Pack(made, verify=True)  # what the stamp vouched for holds
    checked.clear()
    given = commit(tmp_path / "given", lambda writer: writer.add_vocabulary_files(tokenizer.files()), eot)
    assert checked == [given]
    checked.clear()
    with pytest.raises(IntegrityError, match="pad_id 200 is an ordinary token"):
        commit(tmp_path / "ordinary-pad", lambda writer: writer.add_vocabulary(tokenizer), 200)
    assert checked == [tmp_path / "ordinary-pad"]
    checked.clear()

    def overwritten(writer: PackWriter) -> None:
        writer.add_vocabulary(tokenizer)
        writer.add_vocabulary_files({"tokenizer.json": b"{}"})

    with pytest.raises(IntegrityError, match="tokenizer.json"):
        commit(tmp_path / "overwritten", overwritten, eot)
    assert checked == [tmp_path / "overwritten"]


def packed_bytes(directory: Path, add: object) -> dict[str, bytes]:
    with PackWriter(directory, vocabulary=VOCABULARY) as writer:
        add(writer)  # type: ignore[operator]
        writer.commit(source=SOURCE, cut=DocumentCut(rule="demo"))
    return {name: (directory / name).read_bytes() for name in ("tokens.npy", "starts.npy", "meta.json")}


@pytest.mark.parametrize("dtype", [np.uint32, np.int64, np.uint16, np.int32])
def test_add_documents_writes_the_bytes_add_flat_writes(tmp_path: Path, dtype: type) -> None:
    rng = np.random.default_rng(0)
    documents = [rng.integers(0, 50, size=n).astype(dtype) for n in (5, 0, 17, 1, 0, 40)]
    lengths = np.array([len(d) for d in documents])
    joined = packed_bytes(tmp_path / "joined", lambda w: w.add_documents(documents))
    flat = packed_bytes(tmp_path / "flat", lambda w: w.add_flat(np.concatenate(documents), lengths))
    assert joined == flat


def test_add_documents_refuses_ids_outside_the_vocabulary_and_floats(tmp_path: Path) -> None:
    cases = [
        ([np.array([1, -1], dtype=np.int64)], "id -1 is outside"),
        ([np.array([1, 2], dtype=np.uint32), np.array([50], dtype=np.uint32)], "id 50 is outside"),
        ([np.array([1.0, 2.0])], "ids must be integers"),
        ([np.array([1, 2], dtype=np.int32), np.array([70], dtype=np.int64)], "id 70 is outside"),
    ]
    for number, (documents, message) in enumerate(cases):
        with PackWriter(tmp_path / f"pack{number}", vocabulary=VOCABULARY) as writer:
            with pytest.raises(InputError, match=message):
                writer.add_documents(documents)
    # Arrays of two integer dtypes are joined as numpy joins them.
    mixed = packed_bytes(tmp_path / "mixed", lambda w: w.add_documents([np.array([1, 2], np.int32), np.array([3], np.int64)]))
    lists = packed_bytes(tmp_path / "lists", lambda w: w.add_documents([[1, 2], [3]]))
    assert mixed == lists


def _flat_2d(writer: PackWriter) -> None:
    writer.add_flat(np.array([[1, 2], [3, 4]]), np.array([2]))


def _documents_2d(writer: PackWriter) -> None:
    writer.add_documents([np.array([[1, 2], [3, 4]])])


def _documents_mixed_dimensions(writer: PackWriter) -> None:
    writer.add_documents([np.array([1, 2]), np.array([[1, 2], [3, 4]])])


def _document_a_number(writer: PackWriter) -> None:
    writer.add_documents([np.array([1, 2]), 7])  # type: ignore[list-item]


@pytest.mark.parametrize("add", [_flat_2d, _documents_2d, _documents_mixed_dimensions, _document_a_number])
def test_ids_that_are_not_one_flat_array_are_refused_before_anything_is_written(tmp_path: Path, add: object) -> None:
    # A 2-D array's len() is its rows: it passed the length check, its 4 ids were written and
    # hashed as 2, and commit published a pack whose tokens.npy does not match its meta.json.
    with PackWriter(tmp_path / "pack", vocabulary=VOCABULARY) as writer:
        with pytest.raises(InputError, match="flat"):
            add(writer)  # type: ignore[operator]
        writer.add_documents([[5, 6]])
        writer.commit(source=SOURCE, cut=DocumentCut(rule="demo"), stamp_verified=True)
    pack = Pack(tmp_path / "pack", verify=True)
    assert pack.n_tokens == 2 and pack.read_span(0, 2).tolist() == [5, 6]


def test_a_writer_stopped_while_it_opens_leaves_no_temporary_folder(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C that lands after the temporary folder is made, before the writer is returned (so
    before ``with`` could clean up), takes the folder with it."""
    import tokpack.store.writer as writer

    def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr(writer, "npy_header", stopped)
    with pytest.raises(KeyboardInterrupt):
        PackWriter(tmp_path / "pack", vocabulary=VOCABULARY)
    assert list(tmp_path.iterdir()) == []
