"""A corpus's manifest (``<file>.manifest.json``) belongs to the file it splits: it holds the ranges and the
cut they were made with, later runs read it back, and a manifest of another file or another split is
refused naming what it was made with."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from cli_runs import EOT, cli_run, pack_documents, prepare_json
from typer.testing import CliRunner

from tokpack.cli import app

from conftest import DATA
from tokenizer_fixtures import narrative_texts

runner = CliRunner()


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_one_files_split_never_touches_its_neighbour(tmp_path: Path, byte_vocab: Path) -> None:
    texts = narrative_texts()
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.txt").write_text("".join(texts[:6]), encoding="utf-8")
    (folder / "b.txt").write_text("".join(texts[6:9]), encoding="utf-8")
    cache = tmp_path / "cache"
    a = prepare_json(folder / "a.txt", "--validation", "0.1", "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pa")
    assert set(a["ranges"]) == {"train", "validation"}
    manifest = json.loads((folder / "a.txt.manifest.json").read_text())
    assert manifest["file"] == "a.txt" and not (folder / "manifest.json").exists()
    # The neighbour is all training, and says so; a's own split still holds for a.
    b = prepare_json(folder / "b.txt", "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pb")
    assert set(b["ranges"]) == {"train"} and b["ranges"]["train"]["source_bytes"] == [0, (folder / "b.txt").stat().st_size]
    again = prepare_json(folder / "a.txt", "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pa2")
    assert again["ranges"] == a["ranges"]
    # The folder as a corpus holds the two texts, not a's split.
    whole = prepare_json(folder, "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pf")
    assert b"".join(pack_documents(tmp_path / "pf")) == (folder / "a.txt").read_bytes() + (folder / "b.txt").read_bytes()
    assert whole["n_tokens"] == (folder / "a.txt").stat().st_size + (folder / "b.txt").stat().st_size
    # b split in its turn gets its own manifest; a's is unchanged.
    before = (folder / "a.txt.manifest.json").read_bytes()
    prepare_json(folder / "b.txt", "--validation", "0.2", "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pb2")
    assert json.loads((folder / "b.txt.manifest.json").read_text())["file"] == "b.txt"
    assert (folder / "a.txt.manifest.json").read_bytes() == before


def test_a_folder_wide_manifest_applies_only_to_the_file_its_hash_names(tmp_path: Path, byte_vocab: Path) -> None:
    texts = narrative_texts()
    folder = tmp_path / "data"
    folder.mkdir()
    a, b = folder / "a.txt", folder / "b.txt"
    a.write_text("".join(texts[:4]), encoding="utf-8")
    b.write_text("".join(texts[4:6]), encoding="utf-8")
    data, cut = a.read_bytes(), len(texts[0].encode()) + len(texts[1].encode()) + len(texts[2].encode())
    (folder / "manifest.json").write_text(json.dumps({  # folder-wide: no file name, only the file's hash
        "schema": "tokpack.corpus.v1", "sha256": hashlib.sha256(data).hexdigest(), "n_bytes": len(data),
        "ranges": {"train": [0, cut], "validation": [cut, len(data)]}}))
    cache = tmp_path / "cache"
    assert prepare_json(a, "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pa")["ranges"]["validation"]["source_bytes"] == [cut, len(data)]
    assert set(prepare_json(b, "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pb")["ranges"]) == {"train"}


def test_another_tools_manifest_json_is_not_a_corpus_manifest(tmp_path: Path, byte_vocab: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"schema": "tokpack.tokenizer-manifest.v1", "files": {}}))
    (folder / "notes.txt").write_text(narrative_texts()[0], encoding="utf-8")
    assert set(prepare_json(folder / "notes.txt", "--vocab", byte_vocab, "--cache-dir", tmp_path / "c")["ranges"]) == {"train"}


def test_a_read_only_data_folder_still_gets_its_split(tmp_path: Path, byte_vocab: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    corpus = folder / "corpus.txt"
    corpus.write_text("".join(narrative_texts()[:6]), encoding="utf-8")
    before = _listing(folder)
    folder.chmod(0o555)
    try:
        elsewhere = tmp_path / "splits" / "corpus.json"
        cache = tmp_path / "cache"
        made = prepare_json(corpus, "--validation", "0.1", "--test", "0.05", "--manifest", elsewhere, "--vocab", byte_vocab,
                        "--cache-dir", cache, "-o", tmp_path / "pack")
        assert set(made["ranges"]) == {"train", "validation", "test"}
        assert json.loads(elsewhere.read_text())["file"] == "corpus.txt"
        # Read back from there by a later run; the data folder was never written (as root, too).
        reused = prepare_json(corpus, "--manifest", elsewhere, "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pack2")
        assert reused["ranges"] == made["ranges"]
        assert _listing(folder) == before
        if os.geteuid() != 0:  # chmod binds: without --manifest, one line naming the way out
            refused = runner.invoke(app, ["prepare", str(corpus), "--validation", "0.1", "--vocab", str(byte_vocab),
                                          "--cache-dir", str(cache)])
            assert refused.exit_code == 2 and "--manifest" in refused.output, refused.output
            assert _listing(folder) == before
    finally:
        folder.chmod(0o755)


def test_a_manifest_of_another_file_is_refused_when_given(tmp_path: Path, byte_vocab: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.txt").write_text(narrative_texts()[0], encoding="utf-8")
    (folder / "b.txt").write_text(narrative_texts()[1], encoding="utf-8")
    prepare_json(folder / "a.txt", "--validation", "0.2", "--vocab", byte_vocab, "--cache-dir", tmp_path / "c", "-o", tmp_path / "p")
    result = runner.invoke(app, ["prepare", str(folder / "b.txt"), "--manifest", str(folder / "a.txt.manifest.json"),
                                 "--vocab", str(byte_vocab), "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2 and "manifest of a.txt, not of b.txt" in result.output, result.output


def test_a_separator_split_is_refused_without_the_separator(eot_corpus: Path, byte_vocab: Path, tmp_path: Path) -> None:
    code, output = cli_run("prepare", eot_corpus, "--vocab", byte_vocab, "--separator", EOT, "--validation", "0.2",
                        "--cache-dir", tmp_path / "cache")
    assert code == 0, output
    # Later, without the separator: read with the manifest's (never with the literal separator in documents).
    code, output = cli_run("prepare", eot_corpus, "--vocab", byte_vocab, "--cache-dir", tmp_path / "cache",
                        "-o", tmp_path / "later")
    assert code == 0, output
    assert json.loads((tmp_path / "later" / "meta.json").read_text())["cut"]["separator"] == EOT
    # Retrying the same split without it finds the same manifest.
    code, output = cli_run("prepare", eot_corpus, "--vocab", byte_vocab, "--validation", "0.2",
                        "--cache-dir", tmp_path / "cache")
    assert code == 0, output
    # Another document size is named too.
    code, output = cli_run("prepare", eot_corpus, "--vocab", byte_vocab, "--separator", EOT, "--document-bytes", "500",
                        "--cache-dir", tmp_path / "cache")
    assert code == 2, output
    assert "--document-bytes 1048576" in output and "--document-bytes 500" in output
    # The same cut still works.
    code, output = cli_run("prepare", eot_corpus, "--vocab", byte_vocab, "--separator", EOT, "--cache-dir", tmp_path / "cache")
    assert code == 0, output


def test_other_shares_name_the_shares_made_with(eot_corpus: Path, byte_vocab: Path, tmp_path: Path) -> None:
    assert cli_run("prepare", eot_corpus, "--vocab", byte_vocab, "--validation", "0.2", "--cache-dir", tmp_path / "c")[0] == 0
    code, output = cli_run("prepare", eot_corpus, "--vocab", byte_vocab, "--validation", "0.3", "--cache-dir", tmp_path / "c")
    assert code == 2 and "--validation 0.2" in output, output


def test_prepare_cuts_validation_and_test_itself_on_document_boundaries(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"".join(p.read_bytes() for p in sorted((DATA / "polish" / "narrative").glob("*.txt"))[:8]))
    result = runner.invoke(app, ["prepare", str(corpus), "--validation", "0.1", "--test", "0.05", "--vocab-size", "300",
                                 "--document-bytes", "2048", "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "pack"),
                                 "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    manifest = json.loads((tmp_path / "corpus.txt.manifest.json").read_text())
    assert manifest["made_by"] == {"validation": 0.1, "test": 0.05, "document_bytes": 2048}
    n = corpus.stat().st_size
    (train_start, a), (a2, b), (b2, end) = manifest["ranges"]["train"], manifest["ranges"]["validation"], manifest["ranges"]["test"]
    assert train_start == 0 and a == a2 and b == b2 and end == n
    assert abs(b - a - 0.1 * n) < 2048 and abs(end - b - 0.05 * n) < 2048
    data = corpus.read_bytes()
    assert data[a - 1 : a] == b"\n" and data[b - 1 : b] == b"\n"  # each range starts a document
    assert printed["pack"] == str(tmp_path / "pack") and (tmp_path / "pack" / "meta.json").is_file()
    assert set(printed["ranges"]) == {"train", "validation", "test"}
    assert printed["ranges"]["validation"]["source_bytes"] == [a, b]
    # The same request again reuses the manifest and the pack; another one is refused, one line.
    again = runner.invoke(app, ["prepare", str(corpus), "--validation", "0.1", "--test", "0.05", "--vocab-size", "300",
                                "--document-bytes", "2048", "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "pack"), "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["n_tokens"] == printed["n_tokens"]
    other = runner.invoke(app, ["prepare", str(corpus), "--validation", "0.2", "--document-bytes", "2048",
                                "--cache-dir", str(tmp_path / "c")])
    assert other.exit_code == 2 and "manifest.json: already there with other ranges" in other.output
