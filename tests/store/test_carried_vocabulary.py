"""The vocabulary files a pack carries are checked against the identity its record names, not
only against the checksums the same record lists (anyone can recompute a seal): every carried
file must mean that vocabulary, the folder holds nothing else, and the padding id is one of its
special tokens. Through the API and the command line, as a user runs them."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import tokpack
from tokpack.cli import app
from tokpack.errors import IntegrityError
from tokpack.serve import PackedBatches
from tokpack.store import Pack
from tokpack.store.format import DocumentCut, PackMeta, Source, Span
from tokpack.store.writer import PackWriter
from tokpack.vocab.bytelevel import BpeTokenizer
from tokpack.vocab.loading import load_vocabulary

BYTES = {bytes([b]): b for b in range(256)}
TEXTS = ["abc abd", "ba ab ab", "cab", "abba", "dab ab"]


def vocabulary(merge: bytes) -> BpeTokenizer:
    """A vocabulary of the 256 bytes, one merge and ``<|endoftext|>``: two merges, two
    vocabularies of the same size."""
    return BpeTokenizer(ranks=BYTES | {merge: 256}, special_tokens={"<|endoftext|>": 257})


def write_pack(folder: Path, tokenizer: BpeTokenizer) -> Path:
    """A pack as ``prepare`` writes it: its vocabulary's files carried, ``<|endoftext|>`` the padding id."""
    ids = [tokenizer.encode(text) for text in TEXTS]
    with PackWriter(folder, vocabulary=tokenizer.identity) as writer:
        writer.add_documents(ids)
        writer.add_vocabulary_files(tokenizer.files())
        n_tokens = writer.n_tokens
        writer.commit(source=Source(name="t.txt", sha256="0" * 64, n_bytes=40), cut=DocumentCut(rule="newline"),
                      ranges={"train": Span(documents=(0, len(TEXTS)), tokens=(0, n_tokens))}, pad_id=tokenizer.eot_id)
    return folder


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("carried")
    return {"ab": write_pack(root / "ab", vocabulary(b"ab")), "ba": write_pack(root / "ba", vocabulary(b"ba"))}


def run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def forge(pack: Path, **changes: object) -> None:
    """Rewrite ``meta.json`` with ``changes``, the carried files' checksums taken afresh and the
    seal recomputed, as anyone can (the seal has no key)."""
    meta = PackMeta.model_validate_json((pack / "meta.json").read_text())
    files = {name: hashlib.sha256((pack / name).read_bytes()).hexdigest() for name in meta.vocabulary_files}
    (pack / "meta.json").write_text(meta.model_copy(update={"vocabulary_files": files, **changes}).sealed().to_json())


def refused_everywhere(pack: Path, tmp_path: Path, expected: str) -> None:
    """Every way a user opens, verifies, loads or passes on the pack refuses it, naming ``expected``."""
    with pytest.raises(IntegrityError, match=expected):
        Pack(pack, verify=True)
    with pytest.raises(IntegrityError, match=expected):
        Pack(pack)  # the first open after a change verifies
    with pytest.raises(IntegrityError, match=expected):
        load_vocabulary(pack)
    code, output = run("inspect", pack)
    assert code == 2 and re.search(expected, output) and len(output.strip().splitlines()) == 1, output
    code, output = run("export", pack, tmp_path / "out", "--format", "nanogpt")
    assert code == 2, output
    assert not (tmp_path / "out").exists()


def test_another_vocabularys_tokenizer_json_is_refused(packs: dict[str, Path], tmp_path: Path) -> None:
    """``tokenizer.json`` swapped for another vocabulary's (the same size) with ``meta.json``
    re-sealed matches every checksum: it is refused for what it means, and export copies nothing."""
    pack = tmp_path / "pack"
    shutil.copytree(packs["ab"], pack)
    shutil.copy(packs["ba"] / "vocabulary" / "tokenizer.json", pack / "vocabulary" / "tokenizer.json")
    assert (pack / "vocabulary" / "tokenizer.json").stat().st_size == (packs["ab"] / "vocabulary" / "tokenizer.json").stat().st_size
    forge(pack)
    refused_everywhere(pack, tmp_path, r"vocabulary/tokenizer\.json: .*not the vocabulary meta\.json records")


@pytest.mark.parametrize("name, edit", [
    ("tokenizer_config.json", lambda config: config | {"split_special_tokens": False}),
    ("special_tokens_map.json", lambda tokens: tokens | {"pad_token": "a"}),
    ("tokenizer.json", lambda document: document | {"normalizer": {"type": "Lowercase"}}),
])
def test_a_carried_file_edited_to_mean_something_else_is_refused(packs: dict[str, Path], tmp_path: Path,
                                                                  name: str, edit) -> None:  # type: ignore[no-untyped-def]
    pack = tmp_path / "pack"
    shutil.copytree(packs["ab"], pack)
    path = pack / "vocabulary" / name
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    forge(pack)
    refused_everywhere(pack, tmp_path, rf"vocabulary/{name}: ")


def test_a_file_put_beside_the_carried_ones_is_refused(packs: dict[str, Path], tmp_path: Path) -> None:
    """``transformers`` reads more names from the folder than tokpack writes (``added_tokens.json``):
    the folder holds the recorded files and nothing else."""
    pack = tmp_path / "pack"
    shutil.copytree(packs["ab"], pack)
    (pack / "vocabulary" / "added_tokens.json").write_text('{"ab": 5}')
    refused_everywhere(pack, tmp_path, r"vocabulary/added_tokens\.json: .*not one of the vocabulary files")


def test_a_padding_id_resealed_to_an_ordinary_token_is_refused_wherever_the_pack_opens(
        packs: dict[str, Path], tmp_path: Path) -> None:
    """``pad_id`` re-sealed to an ordinary token absent from the stream (it would become
    ``PackedBatches``' ``ignore_index``) is refused by ``Pack(verify=True)``, ``inspect`` and
    ``PackedBatches``."""
    pack = tmp_path / "pack"
    shutil.copytree(packs["ab"], pack)
    absent = next(i for i in range(256) if i not in set(np.asarray(Pack(pack).tokens).tolist()))
    forge(pack, pad_id=absent)
    expected = rf"meta\.json: pad_id {absent} is an ordinary token of the vocabulary"
    refused_everywhere(pack, tmp_path, expected)
    with pytest.raises(IntegrityError, match=expected):
        PackedBatches(pack, layout="stream", length=4, global_batch=2, seed=0)


def test_an_untouched_pack_passes_and_exports_its_files(packs: dict[str, Path], tmp_path: Path) -> None:
    Pack(packs["ab"], verify=True)
    assert load_vocabulary(packs["ab"]).identity == vocabulary(b"ab").identity
    tokpack.export(packs["ab"], "nanogpt", tmp_path / "out")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (tmp_path / "out" / "vocabulary" / name).read_bytes() == (packs["ab"] / "vocabulary" / name).read_bytes()


def test_vocabulary_files_left_behind_when_the_record_lists_none_are_refused(packs: dict[str, Path], tmp_path: Path) -> None:
    """A record re-sealed to list no vocabulary files would leave the folder unchecked, and a
    user loading ``vocabulary/tokenizer.json`` would get whatever is there."""
    pack = tmp_path / "pack"
    shutil.copytree(packs["ab"], pack)
    shutil.copy(packs["ba"] / "vocabulary" / "tokenizer.json", pack / "vocabulary" / "tokenizer.json")
    forge(pack, vocabulary_files={})
    with pytest.raises(IntegrityError, match=r"vocabulary: holds files meta\.json does not list"):
        Pack(pack, verify=True)
    code, output = run("inspect", pack)
    assert code == 2 and "holds files meta.json does not list" in output, output


def test_a_remote_dataset_checks_its_padding_id_against_the_carried_vocabulary(packs: dict[str, Path], tmp_path: Path) -> None:
    """Reading a dataset from a URL fetches its first shard's vocabulary record and rank file:
    a padding id re-sealed to an ordinary token in every record is refused on open."""
    from tokpack.store import write_dataset
    from tokpack.store.dataset import DatasetRecord
    from tokpack.store.remote import open_remote

    dataset = tmp_path / "ds"
    for rank in range(2):
        write_pack(dataset / f"shard-0000{rank}", vocabulary(b"ab"))
    write_dataset(dataset, ["shard-00000", "shard-00001"], source=Source(name="t.txt", sha256="0" * 64, n_bytes=40),
                  cut=DocumentCut(rule="newline"))
    open_remote(f"file://{dataset}", cache_dir=tmp_path / "cache")
    absent = 100
    for rank in range(2):
        forge(dataset / f"shard-0000{rank}", pad_id=absent)
    record = DatasetRecord.model_validate_json((dataset / "dataset.json").read_text())
    (dataset / "dataset.json").write_text(record.model_copy(update={"pad_id": absent}).sealed().to_json())
    with pytest.raises(IntegrityError, match=rf"shard-00000/meta\.json: pad_id {absent} is an ordinary token"):
        open_remote(f"file://{dataset}", cache_dir=tmp_path / "cache")


def test_an_uploaded_pack_carries_its_vocabulary_and_is_checked_remotely(packs: dict[str, Path], tmp_path: Path) -> None:
    """``upload_dataset`` of a pack uploaded its arrays and record but not the vocabulary files
    its record lists: the remote copy could not decode, and nothing could be checked."""
    from tokpack.store.remote import open_remote, upload_dataset

    upload_dataset(packs["ab"], f"file://{tmp_path / 'remote'}")
    for name in PackMeta.model_validate_json((packs["ab"] / "meta.json").read_text()).vocabulary_files:
        assert (tmp_path / "remote" / name).read_bytes() == (packs["ab"] / name).read_bytes()
    absent = 100
    forge(tmp_path / "remote", pad_id=absent)
    with pytest.raises(IntegrityError, match=rf"remote/meta\.json: pad_id {absent} is an ordinary token"):
        open_remote(f"file://{tmp_path / 'remote'}", cache_dir=tmp_path / "cache")


def test_the_loader_finds_every_record_that_carries_a_vocabulary(packs: dict[str, Path], tmp_path: Path) -> None:
    """The one loader (a lower layer) names the records under which the store carries a
    vocabulary: they are the store's own file names, and each path holding one loads what it
    carries, a Megatron prefix given by itself or by either of its files."""
    from tokpack.store.format import DATASET_FILE, META_FILE
    from tokpack.store.sidecar import PREFIX_SIDECAR, SIDECAR
    from tokpack.vocab import loading

    assert loading.CARRYING_RECORDS == (META_FILE, DATASET_FILE, SIDECAR)
    assert loading.PREFIX_SIDECAR == PREFIX_SIDECAR
    expected = vocabulary(b"ab").identity
    tokpack.export(packs["ab"], "megatron", tmp_path / "web")
    tokpack.export(packs["ab"], "mds", tmp_path / "mds")
    for path in (tmp_path / "web", tmp_path / "web.bin", tmp_path / "web.idx", tmp_path / "mds"):
        assert load_vocabulary(path).identity == expected, path


@pytest.mark.parametrize("name", ["tokenizer.json", "ranks.tiktoken", "vocabulary.json"])
def test_a_carried_file_that_is_a_fifo_is_refused_never_opened(packs: dict[str, Path], tmp_path: Path,
                                                                 name: str) -> None:
    """A FIFO in a carried file's place would block every open of the pack for ever: it is
    refused, unread, however the pack is opened."""
    from fifos import feeding_fifo

    pack = tmp_path / "pack"
    shutil.copytree(packs["ab"], pack)
    path = pack / "vocabulary" / name
    with feeding_fifo(path, path.read_bytes()) as opened:  # a reader that opened it would get the right bytes
        refused_everywhere(pack, tmp_path, rf"vocabulary/{re.escape(name)}: not a regular file \(a FIFO\)")
    assert not opened, "the FIFO was opened"


def test_a_carried_file_that_is_a_device_is_refused_never_read(packs: dict[str, Path], tmp_path: Path) -> None:
    """A link to a device in a carried file's place (``/dev/zero`` would be read until memory runs
    out) is refused for what it is."""
    pack = tmp_path / "pack"
    shutil.copytree(packs["ab"], pack)
    (pack / "vocabulary" / "ranks.tiktoken").unlink()
    (pack / "vocabulary" / "ranks.tiktoken").symlink_to("/dev/null")
    refused_everywhere(pack, tmp_path, r"vocabulary/ranks\.tiktoken: not a regular file \(a character device\)")
