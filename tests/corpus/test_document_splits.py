"""Held-out splits of folders, JSON Lines and Parquet: whole files, records or rows, evenly spread,
deterministic, recorded in the corpus's manifest like a text file's, and never trained on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tokpack import prepare
from tokpack.cli import app
from tokpack.corpus.manifest import held_out_ranges
from tokpack.corpus.sources import open_corpus
from tokpack.errors import InputError
from tokpack.store.origins import read_origins

from conftest import DATA

runner = CliRunner()


@pytest.fixture(scope="module")
def lines() -> list[str]:
    text = b"".join(path.read_bytes() for path in sorted((DATA / "polish" / "narrative").glob("*.txt"))[:8]).decode()
    return [line for line in text.splitlines(keepends=True) if line.strip()]


def _folder(root: Path, lines: list[str], n_files: int = 20) -> Path:
    folder = root / "corpus"
    (folder / "sub").mkdir(parents=True)
    for index in range(n_files):
        where = folder / "sub" if index % 2 else folder
        (where / f"f{index:02d}.txt").write_text(f"file {index}\n" + "".join(lines[index * 5 : index * 5 + 5]), encoding="utf-8")
    return folder


def test_a_folder_with_validation_has_a_validation_range_of_whole_files(lines: list[str], tmp_path: Path) -> None:
    folder = _folder(tmp_path, lines)
    prepared = prepare(folder, cache_dir=tmp_path / "cache", vocab_size=300, validation=0.1, document_bytes=64)
    ranges = prepared.meta.ranges
    assert set(ranges) == {"train", "validation"}
    manifest = json.loads((tmp_path / "corpus.manifest.json").read_text())
    assert manifest["schema"] == "tokpack.corpus.documents.v1" and manifest["format"] == "directory"
    assert manifest["units"] == 20 and manifest["counts"] == {"train": 18, "validation": 2}
    assert manifest["made_by"] == {"validation": 0.1, "test": 0.0}
    # The held-out files are the ones the rule names (in sorted path order), every document of
    # each of them, and nothing else: decoded, the validation range is exactly their text.
    files = sorted(path for path in folder.rglob("*.txt"))
    held = [file for file, kind in zip(files, held_out_ranges(20, 0.1, 0.0)) if kind == 1]
    assert len(held) == 2 and held[0].parent != held[1].parent  # spread: one from each subfolder
    first, last = ranges["validation"].documents
    tokenizer, pack = prepared.tokenizer, prepared.pack()
    starts = np.append(np.asarray(pack.starts), pack.n_tokens)
    text = "".join(tokenizer.decode(np.asarray(pack.tokens[starts[d] : starts[d + 1]]).tolist()) for d in range(first, last))
    assert text == "".join(file.read_text(encoding="utf-8") for file in held)
    assert last == pack.n_docs and ranges["train"].documents == (0, first)  # held out after the training documents
    # Never trained on: the training sample holds no held-out text.
    with open_corpus(folder, document_bytes=64) as source:
        sample = "".join(source.training_sample(10**9))
    firsts = {file: file.read_text(encoding="utf-8").splitlines()[0] + "\n" for file in files}
    assert all((firsts[file] in sample) == (file not in held) for file in files)
    # Deterministic, and a later run without validation reads the same split from the manifest.
    again = prepare(folder, cache_dir=tmp_path / "other-cache", vocab_size=300, document_bytes=64)
    assert again.meta.ranges == ranges and np.array_equal(np.asarray(again.pack().tokens), np.asarray(pack.tokens))


def test_json_lines_and_parquet_hold_out_whole_records_and_rows(lines: list[str], tmp_path: Path) -> None:
    records = tmp_path / "r.jsonl"
    records.write_text("".join(json.dumps({"body": line}) + "\n" for line in lines[:200]), encoding="utf-8")
    prepared = prepare(records, cache_dir=tmp_path / "cache", vocab_size=300, text_field="body", validation=0.1, test=0.05)
    kinds = held_out_ranges(200, 0.1, 0.05)
    spans = {name: span.documents for name, span in prepared.meta.ranges.items()}
    assert spans == {"train": (0, 170), "validation": (170, 190), "test": (190, 200)}
    assert [int((kinds == k).sum()) for k in (0, 1, 2)] == [170, 20, 10]
    tokenizer, pack = prepared.tokenizer, prepared.pack()
    starts = np.append(np.asarray(pack.starts), pack.n_tokens)
    test_text = [tokenizer.decode(np.asarray(pack.tokens[starts[d] : starts[d + 1]]).tolist()) for d in range(190, 200)]
    assert test_text == [line for line, kind in zip(lines[:200], kinds) if kind == 2]

    table = pa.table({"text": lines[:300]})
    rows = tmp_path / "rows.parquet"
    pq.write_table(table, rows, row_group_size=64)  # five row groups
    prepared = prepare(rows, cache_dir=tmp_path / "cache", vocab_size=300, validation=0.2)
    assert prepared.meta.ranges["validation"].documents == (240, 300)
    pack = prepared.pack()
    starts = np.append(np.asarray(pack.starts), pack.n_tokens)
    decoded = [prepared.tokenizer.decode(np.asarray(pack.tokens[starts[d] : starts[d + 1]]).tolist()) for d in range(300)]
    kinds = held_out_ranges(300, 0.2, 0.0)
    assert decoded == [line for line, kind in zip(lines[:300], kinds) if kind == 0] + \
        [line for line, kind in zip(lines[:300], kinds) if kind == 1]


@pytest.mark.parametrize("kind", ["folder", "jsonl", "parquet"])
def test_every_document_of_a_split_corpus_names_the_bytes_it_came_from(kind: str, lines: list[str], tmp_path: Path) -> None:
    # Held-out units move after the training ones in the pack; their origins still name them.
    texts = [f"record {index}: {line}" for index, line in enumerate(lines[:120])]
    if kind == "folder":
        corpus = _folder(tmp_path, lines)
    elif kind == "jsonl":
        corpus = tmp_path / "r.jsonl"
        corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf-8")
    else:
        corpus = tmp_path / "rows.parquet"
        pq.write_table(pa.table({"text": texts}), corpus, row_group_size=32)
    prepared = prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=300, validation=0.1, test=0.1, document_bytes=96)
    pack, tokenizer = prepared.pack(), prepared.tokenizer
    record, rows = read_origins(pack)  # type: ignore[misc]
    starts = np.append(np.asarray(pack.starts), pack.n_tokens)
    assert record.kind == ("bytes" if kind == "folder" else "records") and len(rows) == pack.n_docs
    for document, (unit, start, end) in enumerate(np.asarray(rows).tolist()):
        if kind == "folder":
            source = (tmp_path / record.files[unit]).read_bytes()
        else:
            source = texts[unit].encode("utf-8")
        ids = np.asarray(pack.tokens[starts[document] : starts[document + 1]]).tolist()
        assert tokenizer.decode_bytes(ids) == source[start:end], (document, unit)


def test_an_edited_corpus_or_another_split_is_refused_with_the_fix(lines: list[str], tmp_path: Path) -> None:
    folder = _folder(tmp_path, lines)
    prepare(folder, cache_dir=tmp_path / "cache", vocab_size=300, validation=0.1)
    with pytest.raises(InputError, match=r"already there with another split \(validation 0.1, test 0\); delete it"):
        prepare(folder, cache_dir=tmp_path / "cache", vocab_size=300, validation=0.2)
    (folder / "f00.txt").write_text("edited\n", encoding="utf-8")
    manifest = tmp_path / "corpus.manifest.json"
    with pytest.raises(InputError) as caught:
        prepare(folder, cache_dir=tmp_path / "cache", vocab_size=300)
    assert str(caught.value).startswith(f"{manifest}: corpus changed since it was split (SHA-256 ")
    assert str(caught.value).endswith("restore corpus as it was, or delete corpus.manifest.json to split it again "
                                      "(the held-out documents change, so evaluate anew)")
    manifest.unlink()
    assert "validation" not in prepare(folder, cache_dir=tmp_path / "cache", vocab_size=300).meta.ranges


def test_the_command_splits_a_folder_and_a_sharded_job_keeps_the_split(lines: list[str], tmp_path: Path) -> None:
    folder = _folder(tmp_path, lines)
    result = runner.invoke(app, ["prepare", str(folder), "--validation", "0.1", "--vocab-size", "300",
                                 "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "pack"), "--json"])
    assert result.exit_code == 0, result.output
    single = json.loads(result.stdout)
    assert single["ranges"]["validation"]["documents"][1] - single["ranges"]["validation"]["documents"][0] == 2
    sharded = runner.invoke(app, ["prepare", str(folder), "--vocab", str(tmp_path / "pack"), "--shards", "2",
                                  "--workers", "1", "-o", str(tmp_path / "dataset"), "--json"])
    assert sharded.exit_code == 0, sharded.output
    record = json.loads(sharded.stdout)
    assert record["ranges"]["validation"]["documents"] == single["ranges"]["validation"]["documents"]
    assert record["n_tokens"] == single["n_tokens"]


@pytest.mark.parametrize("edit", [{"made_by": {"validation": 0.6, "test": 0.5}, "counts": {"train": 0, "validation": 11, "test": 9}},
                                  {"counts": {"train": 20, "validation": 0}},
                                  {"made_by": {"validation": 0.0, "test": 0.0}}])
def test_a_forged_split_is_refused(edit: dict[str, object], lines: list[str], tmp_path: Path) -> None:
    """A split whose shares hold out every document, or whose counts are not what its rule holds
    out, was not written by tokpack: it is refused, not used to cut the corpus."""
    folder = _folder(tmp_path, lines)
    prepare(folder, cache_dir=tmp_path / "cache", vocab_size=300, validation=0.2, document_bytes=64)
    path = tmp_path / "corpus.manifest.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | edit))
    with pytest.raises(InputError, match="corpus.manifest.json: .*; delete it to split the corpus again"):
        prepare(folder, cache_dir=tmp_path / "cache", vocab_size=300, document_bytes=64)


def test_a_manifest_inside_the_folder_it_splits_is_refused_with_the_fix(lines: list[str], tmp_path: Path) -> None:
    """Written inside the folder, the split would be one of the folder's files: the folder would
    change by being split, and the run that wrote it would refuse it (deleting it, as that
    refusal advises, only starts the loop again)."""
    folder = _folder(tmp_path, lines)
    for manifest in (folder / "split.json", folder / "sub" / "split.json"):
        with pytest.raises(InputError, match=f"{manifest}: is inside the corpus folder {folder}.*outside the folder"):
            prepare(folder, cache_dir=tmp_path / "cache", vocab_size=300, validation=0.2, manifest=manifest, document_bytes=64)
        assert not manifest.exists()
    result = runner.invoke(app, ["prepare", str(folder), "--vocab-size", "300", "--validation", "0.2", "--manifest",
                                 str(folder / "split.json"), "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
