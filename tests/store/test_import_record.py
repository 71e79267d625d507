"""An export carries the exported pack's own sealed record, and reading or importing it checks
the sidecar (which has no seal) against that record and against the files it describes: an
import restores the pack exactly, or refuses. Every range a pack can have goes out and comes
back (``test`` included), and an export with appended separators imports with them kept."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.errors import IntegrityError
from tokpack.serve import TokenBatches
from tokpack.store import Pack
from tokpack.store.format import DocumentCut, Source, Span
from tokpack.store.writer import PackWriter
from tokpack.vocab.bytelevel import BpeTokenizer

FORMATS = ("megatron", "nanogpt", "litdata", "mds", "hf")
TOKENIZER = BpeTokenizer(ranks={bytes([b]): b for b in range(256)} | {b"ab": 256, b"ba": 257},
                         special_tokens={"<|endoftext|>": 258})


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack as ``prepare --validation --test`` writes it: three splits, its vocabulary carried,
    ``<|endoftext|>`` the padding id, a count of characters."""
    rng = np.random.default_rng(3)
    texts = ["".join(rng.choice(list("abc d"), size=int(rng.integers(1, 30)))) for _ in range(40)]
    folder = tmp_path_factory.mktemp("splits") / "pack"
    with PackWriter(folder, vocabulary=TOKENIZER.identity) as writer:
        writer.add_vocabulary(TOKENIZER)
        ranges = {}
        for name, (first, last) in {"train": (0, 30), "validation": (30, 36), "test": (36, 40)}.items():
            begin = (writer.n_docs, writer.n_tokens)
            writer.add_documents([TOKENIZER.encode(text) for text in texts[first:last]])
            ranges[name] = Span(documents=(begin[0], writer.n_docs), tokens=(begin[1], writer.n_tokens))
        writer.commit(source=Source(name="c.txt", sha256="5" * 64, n_bytes=600), cut=DocumentCut(rule="newline"),
                      ranges=ranges, counts={"characters": 600}, pad_id=TOKENIZER.eot_id)
    return folder


def run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def sidecar_of(tmp_path: Path, fmt: str) -> Path:
    return tmp_path / ("out.tokpack.json" if fmt == "megatron" else "out/tokpack-export.json")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_range_comes_back_and_the_record_is_restored_exactly(pack: Path, tmp_path: Path, fmt: str) -> None:
    """Every range comes back, ``test`` included (a nanoGPT export's files are read in stream
    order, not in the sidecar's key order, where ``test`` comes first). The import restores the
    exported pack's ``meta.json`` byte for byte: ranges, padding id, counts, source, cut, checksums."""
    code, output = run("export", pack, tmp_path / "out", "--format", fmt)
    assert code == 0, output
    assert "test (4 documents)" in output
    code, output = run("import", tmp_path / "out", tmp_path / "back")
    assert code == 0, output
    assert (tmp_path / "back" / "meta.json").read_bytes() == (pack / "meta.json").read_bytes()
    for name in ("tokens.npy", "starts.npy"):
        assert (tmp_path / "back" / name).read_bytes() == (pack / name).read_bytes()


@pytest.mark.parametrize("fmt", ["megatron", "hf"])
def test_an_export_with_appended_separators_imports_with_them_kept(pack: Path, tmp_path: Path, fmt: str) -> None:
    """``import --keep-eod`` of an ``--append-eod`` export with ranges: every document ends
    with the separator, each range holds its documents, and the separator is no padding id (it
    is in the stream)."""
    assert run("export", pack, tmp_path / "out", "--format", fmt, "--append-eod")[0] == 0
    code, output = run("import", tmp_path / "out", tmp_path / "back", "--keep-eod")
    assert code == 0, output
    original, back = Pack(pack), Pack(tmp_path / "back", verify=True)
    assert back.n_docs == original.n_docs and back.n_tokens == original.n_tokens + original.n_docs
    ends = np.append(back.starts[1:], back.n_tokens) - 1
    assert (np.asarray(back.tokens)[ends] == TOKENIZER.eot_id).all()
    assert {name: span.documents for name, span in back.meta.ranges.items()} == \
        {name: span.documents for name, span in original.meta.ranges.items()}
    assert back.meta.pad_id is None


def _move_boundary(sidecar: dict, pack: Path, n: int = 3) -> None:  # type: ignore[type-arg]
    """Make the last ``n`` training documents validation documents, in the ranges and the parts
    alike (the sidecar consistent with itself)."""
    ranges = sidecar["ranges"]
    train, validation = ranges["train"], ranges["validation"]
    starts = Pack(pack).starts
    boundary = train["documents"][1] - n
    token = int(starts[boundary])
    train["documents"][1], train["tokens"][1] = boundary, token
    validation["documents"][0], validation["tokens"][0] = boundary, token
    for name in ("train", "validation"):
        sidecar["parts"][name]["documents"] = ranges[name]["documents"]
        sidecar["parts"][name]["tokens"] = ranges[name]["tokens"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_sidecar_whose_split_boundary_moved_is_refused(pack: Path, tmp_path: Path, fmt: str) -> None:
    """The sidecar has no seal: a split boundary moved in it would import as a "verified" pack
    whose splits differ from the exported pack's. ``inspect`` and ``import`` refuse it."""
    assert run("export", pack, tmp_path / "out", "--format", fmt)[0] == 0
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    _move_boundary(sidecar, pack)
    path.write_text(json.dumps(sidecar))
    for command in (["inspect", tmp_path / "out"], ["import", tmp_path / "out", tmp_path / "back"]):
        code, output = run(*command)
        assert code == 2 and re.search(r"tokpack(-export|)\.json: .*ranges differ from the exported pack's record", output), output
        assert len(output.strip().splitlines()) == 1, output
    assert not (tmp_path / "back").exists() and not list(tmp_path.glob(".back*"))


@pytest.mark.parametrize("fmt", ["nanogpt", "megatron"])
def test_a_sidecar_and_record_both_moved_are_refused_by_the_files(pack: Path, tmp_path: Path, fmt: str) -> None:
    """The carried record's seal has no key either: moved in the record too (seal recomputed),
    the boundary still disagrees with the files, which hold each range's documents apart."""
    from tokpack.store.format import PackMeta

    assert run("export", pack, tmp_path / "out", "--format", fmt)[0] == 0
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    _move_boundary(sidecar, pack)
    record = PackMeta.model_validate(sidecar["sealed_record"])
    record = record.model_copy(update={"ranges": {name: Span.model_validate(span) for name, span in sidecar["ranges"].items()}})
    sidecar["sealed_record"] = json.loads(record.sealed().to_json())
    path.write_text(json.dumps(sidecar))
    for command in (["inspect", tmp_path / "out"], ["import", tmp_path / "out", tmp_path / "back"]):
        code, output = run(*command)
        assert code == 2 and "documents, the export's sidecar says" in output, output
    assert not (tmp_path / "back").exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_sidecar_padding_id_edited_to_an_ordinary_token_is_refused(pack: Path, tmp_path: Path, fmt: str) -> None:
    """``pad_id`` edited to an ordinary token in an export's sidecar never reaches the pack
    ``tokpack import`` writes, nor a reader of the export."""
    assert run("export", pack, tmp_path / "out", "--format", fmt)[0] == 0
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    sidecar["pad_id"] = 100  # "d": an ordinary byte
    path.write_text(json.dumps(sidecar))
    for command in (["inspect", tmp_path / "out"], ["import", tmp_path / "out", tmp_path / "back"]):
        code, output = run(*command)
        assert code == 2 and "pad_id 100 differs from the exported pack's record" in output, output
    assert not (tmp_path / "back").exists()
    with pytest.raises(IntegrityError, match="pad_id 100 differs from the exported pack's record"):
        TokenBatches(str(tmp_path / "out"), batch=2, length=4)


@pytest.mark.parametrize("fmt", ["nanogpt", "megatron", "hf"])
def test_a_sidecar_without_the_record_still_holds_its_ranges_to_its_parts(pack: Path, tmp_path: Path, fmt: str) -> None:
    """An export that carries no record (or had it removed) has only its parts to hold its
    ranges to: a split boundary moved in ``ranges`` alone is refused, not imported."""
    assert run("export", pack, tmp_path / "out", "--format", fmt)[0] == 0
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    del sidecar["sealed_record"]
    parts = json.loads(json.dumps(sidecar["parts"]))
    _move_boundary(sidecar, pack)
    sidecar["parts"] = parts
    path.write_text(json.dumps(sidecar))
    for command in (["inspect", tmp_path / "out"], ["import", tmp_path / "out", tmp_path / "back"]):
        code, output = run(*command)
        assert code == 2 and "range 'train' differs from the part written for it" in output, output
    assert not (tmp_path / "back").exists()


@pytest.mark.parametrize("fmt", ["megatron", "nanogpt", "hf"])
def test_an_empty_range_goes_out_and_comes_back(tmp_path: Path, fmt: str) -> None:
    """A pack whose validation range holds no document (``prepare --validation`` on a corpus of
    one document writes one, with a warning) exports and imports back: its empty part is the
    empty range at the end of the stream, not the sidecar edited."""
    pack = tmp_path / "pack"
    with PackWriter(pack, vocabulary=TOKENIZER.identity) as writer:
        writer.add_vocabulary(TOKENIZER)
        writer.add_documents([TOKENIZER.encode("abba cab"), TOKENIZER.encode("dab")])
        end = (writer.n_docs, writer.n_tokens)
        writer.commit(source=Source(name="c.txt", sha256="5" * 64, n_bytes=12), cut=DocumentCut(rule="newline"),
                      ranges={"train": Span(documents=(0, end[0]), tokens=(0, end[1])),
                              "validation": Span(documents=(end[0], end[0]), tokens=(end[1], end[1]))},
                      pad_id=TOKENIZER.eot_id)
    code, output = run("export", pack, tmp_path / "out", "--format", fmt)
    assert code == 0, output
    assert run("inspect", tmp_path / "out")[0] == 0
    code, output = run("import", tmp_path / "out", tmp_path / "back")
    assert code == 0, output
    assert (tmp_path / "back" / "meta.json").read_bytes() == (pack / "meta.json").read_bytes()
    # an empty part's ids given as (0, 0) hold nothing either: still the same part
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    sidecar["parts"]["validation"]["tokens"] = [0, 0]
    path.write_text(json.dumps(sidecar))
    code, output = run("import", tmp_path / "out", tmp_path / "again")
    assert code == 0, output


@pytest.mark.parametrize("fmt", ["megatron", "nanogpt"])
def test_ids_changed_with_the_sidecar_checksums_recomputed_are_refused_where_the_export_is_read(
        pack: Path, tmp_path: Path, fmt: str) -> None:
    """The sidecar's file checksums have no seal: ids changed (every "a" made "c", lengths kept)
    with the file's SHA-256 recomputed match them. The whole exported stream must be the one
    the exported pack's sealed record hashes, for ``inspect``, readers in place and ``import``."""
    import hashlib

    assert run("export", pack, tmp_path / "out", "--format", fmt)[0] == 0
    code, output = run("inspect", tmp_path / "out")
    assert code == 0 and "the ids are the exported pack's stream" in output, output
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    name = next(file for file in sidecar["parts"]["train"]["files"] if file.endswith(".bin"))  # raw ids
    data = path.parent / name
    ids = np.fromfile(data, dtype=np.uint16)
    assert (ids == 97).any()
    ids[ids == 97] = 99
    ids.tofile(data)
    sidecar["files_sha256"][name] = hashlib.sha256(data.read_bytes()).hexdigest()
    path.write_text(json.dumps(sidecar))
    code, output = run("inspect", tmp_path / "out")
    assert code == 2 and "not the stream of the exported pack" in output, output
    with pytest.raises(IntegrityError, match="not the stream of the exported pack"):
        TokenBatches(str(tmp_path / "out"), batch=2, length=4)
    code, output = run("import", tmp_path / "out", tmp_path / "back")
    assert code == 2 and not (tmp_path / "back").exists(), output


@pytest.mark.parametrize("fmt", ["megatron", "hf"])
def test_a_separator_renamed_in_the_sidecar_is_refused(pack: Path, tmp_path: Path, fmt: str) -> None:
    """``eod_id`` is the sidecar's word alone (the pack never had one): named as an ordinary id,
    the documents do not end with it, which reading the export in place finds."""
    assert run("export", pack, tmp_path / "out", "--format", fmt, "--append-eod")[0] == 0
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    sidecar["eod_id"] = 97
    path.write_text(json.dumps(sidecar))
    code, output = run("inspect", tmp_path / "out")
    assert code == 2 and "does not end with the separator 97" in output, output


@pytest.mark.parametrize("fmt", ["megatron", "hf"])
def test_a_separator_removed_from_the_sidecar_is_named_as_ids_not_documents(pack: Path, tmp_path: Path, fmt: str) -> None:
    assert run("export", pack, tmp_path / "out", "--format", fmt, "--append-eod")[0] == 0
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    sidecar["eod_id"] = None
    path.write_text(json.dumps(sidecar))
    code, output = run("inspect", tmp_path / "out")
    assert code == 2 and re.search(r"the files of part 'train' hold [\d,]+ ids, the export's sidecar says [\d,]+ ids "
                                   r"\(no eod_id: no end-of-document ids\)", output), output


@pytest.mark.parametrize("fmt", ["megatron", "hf"])
def test_a_separator_added_to_the_sidecar_is_named_in_the_count_it_changes(pack: Path, tmp_path: Path, fmt: str) -> None:
    """An ``eod_id`` set in the sidecar of an export written without separators says the files
    hold an id more a document: the refusal says where its count comes from."""
    assert run("export", pack, tmp_path / "out", "--format", fmt)[0] == 0
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    sidecar["eod_id"] = 5
    path.write_text(json.dumps(sidecar))
    code, output = run("inspect", tmp_path / "out")
    assert code == 2 and re.search(r"the files of part 'train' hold [\d,]+ ids, the export's sidecar says [\d,]+ ids "
                                   r"\([\d,]+ and its eod_id 5 after each of [\d,]+ documents\)", output), output


@pytest.mark.parametrize("fmt", ["megatron", "nanogpt"])
def test_a_sidecar_that_leaves_out_the_carried_vocabulary_is_refused(pack: Path, tmp_path: Path, fmt: str) -> None:
    """The exported pack's record lists the vocabulary files it carries: an export whose sidecar
    drops them would import as a pack without them (its ``meta.json`` silently not the record)."""
    assert run("export", pack, tmp_path / "out", "--format", fmt)[0] == 0
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    folder = sidecar.pop("vocabulary_dir")
    sidecar["files_sha256"] = {k: v for k, v in sidecar["files_sha256"].items() if not k.startswith(folder + "/")}
    path.write_text(json.dumps(sidecar))
    for command in (["inspect", tmp_path / "out"], ["import", tmp_path / "out", tmp_path / "back"]):
        code, output = run(*command)
        assert code == 2 and "the exported pack carries vocabulary files" in output, output
    assert not (tmp_path / "back").exists()


@pytest.mark.parametrize("fmt", ["megatron", "nanogpt"])
def test_the_sidecar_lists_the_exported_counts_and_is_held_to_them(pack: Path, tmp_path: Path, fmt: str) -> None:
    """The sidecar lists the exported pack's counts (characters, ...) beside its other fields:
    edited there, they differ from the carried record and are refused; an export without the
    record still brings them back on import."""
    assert run("export", pack, tmp_path / "out", "--format", fmt)[0] == 0
    path = sidecar_of(tmp_path, fmt)
    sidecar = json.loads(path.read_text())
    assert sidecar["counts"] == {"characters": 600}
    path.write_text(json.dumps(sidecar | {"counts": {"characters": 6000}}))
    code, output = run("inspect", tmp_path / "out")
    assert code == 2 and "counts" in output and "differs from the exported pack's record" in output, output
    del sidecar["sealed_record"]
    path.write_text(json.dumps(sidecar))
    code, output = run("import", tmp_path / "out", tmp_path / "back")
    assert code == 0, output
    assert Pack(tmp_path / "back").meta.counts == {"characters": 600}


@pytest.mark.parametrize("eod_id", [-1, 1.5, True])
def test_an_end_of_document_id_that_is_no_id_is_refused_naming_it(pack: Path, tmp_path: Path, eod_id: object) -> None:
    from tokpack.errors import InputError
    from tokpack.store.exporting import export
    from tokpack.store.importing import import_pack, open_foreign

    export(Pack(pack), "megatron", tmp_path / "m")
    with pytest.raises(InputError, match=r"^eod_id must be a non-negative integer, got"):
        open_foreign(tmp_path / "m", eod_id=eod_id)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"^eod_id must be a non-negative integer, got"):
        import_pack(tmp_path / "m", tmp_path / "back", eod_id=eod_id)  # type: ignore[arg-type]
    assert not (tmp_path / "back").exists()
