"""A pack's vocabulary goes wherever its ids go: a moved pack decodes with no cache, a sharded dataset
and its merge carry it, every export carries it and an import keeps it, an altered carried file is
refused, and a pack that carries no vocabulary files still opens."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from cli_runs import EOT, cli_json, cli_refused, cli_run, polish_corpus_in
from typer.testing import CliRunner

from tokpack import load_vocabulary, tokenizer_for
from tokpack.cli import app
from tokpack.errors import InputError, IntegrityError
from tokpack.store import Pack
from tokpack.vocab import BpeTokenizer

from conftest import REPO
from tokenizer_fixtures import narrative_texts

runner = CliRunner()
FORMATS = ("hf", "litdata", "mds", "nanogpt", "megatron")
ARTIFACT = REPO / "artifacts" / "polish-8192"
def test_a_pack_carries_its_vocabulary_and_decodes_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = polish_corpus_in(tmp_path / "a")
    made = cli_json("prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "cache"))
    moved = tmp_path / "elsewhere" / "pack"
    shutil.copytree(made["pack"], moved)
    shutil.rmtree(tmp_path / "cache")
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "other-cache"))
    shown = runner.invoke(app, ["inspect", str(moved), "--decode", "0"])
    assert shown.exit_code == 0, shown.output
    first = Pack(moved)
    text = corpus.read_text(encoding="utf-8")
    assert shown.stdout.endswith(text[: len(load_vocabulary(moved).decode(first.document(0).tolist()))])
    assert f"vocabulary: {moved / 'vocabulary'}" in " ".join(shown.stdout.split()).replace("\n", "")
    assert json.loads(runner.invoke(app, ["inspect", str(moved), "--json"]).stdout)["vocabulary_dir"] == str(moved / "vocabulary")
    tokenizer = tokenizer_for(first.meta, moved)
    assert tokenizer.identity == first.vocabulary and "".join(
        tokenizer.decode(first.document(d).tolist()) for d in range(first.n_docs)) == text
    assert {p.name for p in (moved / "vocabulary").iterdir()} >= {"tokenizer.json", "ranks.tiktoken", "vocabulary.json"}
    # A tampered vocabulary file is refused, by the loader and by inspect.
    tampered = moved / "vocabulary" / "tokenizer.json"
    tampered.write_bytes(tampered.read_bytes().replace(b'"<|endoftext|>"', b'"<|endoftext|> "', 1))
    with pytest.raises(IntegrityError, match="tokenizer.json"):
        load_vocabulary(moved)
    assert "tokenizer.json" in cli_refused("inspect", str(moved))


def test_a_sharded_dataset_carries_its_vocabulary(tmp_path: Path) -> None:
    corpus = polish_corpus_in(tmp_path / "a")
    made = runner.invoke(app, ["prepare", str(corpus), "--vocab", str(ARTIFACT / "tokenizer.json"), "--shards", "2",
                               "--workers", "1", "--document-bytes", "4096", "--out", str(tmp_path / "d")])
    assert made.exit_code == 0, made.output
    assert load_vocabulary(tmp_path / "d").identity == load_vocabulary(ARTIFACT / "tokenizer.json").identity
    merged = runner.invoke(app, ["merge", str(tmp_path / "d"), str(tmp_path / "m")])
    assert merged.exit_code == 0, merged.output
    assert load_vocabulary(tmp_path / "m").identity == load_vocabulary(ARTIFACT / "tokenizer.json").identity


def test_a_pack_that_carries_no_vocabulary_files_still_opens(tmp_path: Path) -> None:
    corpus = polish_corpus_in(tmp_path / "a")
    made = cli_json("prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "cache"))
    bare = tmp_path / "bare"
    shutil.copytree(made["pack"], bare)
    shutil.rmtree(bare / "vocabulary")
    meta = json.loads((bare / "meta.json").read_text())
    del meta["vocabulary_files"], meta["seal"]
    # Sealed without the field: the SHA-256 of the other fields.
    meta["seal"] = hashlib.sha256(json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    (bare / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    assert Pack(bare, verify=True).n_tokens == made["n_tokens"]
    with pytest.raises(InputError, match="carries no vocabulary files"):
        load_vocabulary(bare)
    shown = runner.invoke(app, ["inspect", str(bare)])
    assert shown.exit_code == 0 and "not carried" in shown.output


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack (with its vocabulary/) exported in every format."""
    root = tmp_path_factory.mktemp("exports")
    (root / "c.txt").write_text(EOT.join(narrative_texts()), encoding="utf-8")
    vocab = BpeTokenizer(ranks={bytes([b]): b for b in range(256)}).save(root / "vocab")
    code, output = cli_run("prepare", root / "c.txt", "--vocab", vocab, "--separator", EOT, "--validation", "0.2",
                        "-o", root / "pack", "--cache-dir", root / "cache")
    assert code == 0, output
    for fmt in FORMATS:
        code, output = cli_run("export", root / "pack", root / "ex" / fmt, "-f", fmt)
        assert code == 0, output
    return root


@pytest.mark.parametrize("fmt", FORMATS)
def test_exports_carry_the_vocabulary_and_imports_keep_it(exported: Path, fmt: str) -> None:
    folder = exported / "ex" / (f"{fmt}.vocabulary" if fmt == "megatron" else f"{fmt}/vocabulary")
    pack_vocabulary = exported / "pack" / "vocabulary"
    assert sorted(path.name for path in folder.iterdir()) == sorted(path.name for path in pack_vocabulary.iterdir())
    # The files decode the ids on their own: Hugging Face's tokenizer.json reads as the pack's.
    from tokenizers import Tokenizer

    assert Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size() == 257
    imported = exported / "im" / fmt
    code, output = cli_run("import", exported / "ex" / fmt, imported)
    assert code == 0, output
    assert (imported / "vocabulary" / "tokenizer.json").read_bytes() == (pack_vocabulary / "tokenizer.json").read_bytes()
    code, output = cli_run("inspect", imported, "--decode", "0")
    assert code == 0 and "not carried" not in output, output


def test_an_altered_vocabulary_file_in_an_export_is_refused(exported: Path, tmp_path: Path) -> None:
    copy = tmp_path / "hf"
    shutil.copytree(exported / "ex" / "hf", copy)
    with open(copy / "vocabulary" / "vocabulary.json", "a", encoding="utf-8") as handle:
        handle.write(" ")
    for command in (["inspect", copy], ["import", copy, tmp_path / "im"]):
        code, output = cli_run(*command)
        assert code == 2 and "vocabulary.json" in output and "SHA-256 differs" in output, output


@pytest.mark.parametrize("fmt", ["nanogpt", "megatron"])
def test_an_imported_pack_carries_the_vocabulary_it_was_imported_with(tmp_path: Path, fmt: str) -> None:
    corpus = polish_corpus_in(tmp_path)
    vocabulary = ARTIFACT / "vocabulary.json"
    pack, exported, imported = tmp_path / "p", tmp_path / "e", tmp_path / "i"
    for args in (["prepare", str(corpus), "--vocab", str(vocabulary), "--cache-dir", str(tmp_path / "cache"), "-o", str(pack)],
                 ["export", str(pack), str(exported), "-f", fmt],
                 ["import", str(exported), str(imported), "--tokenizer", str(vocabulary)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    # copied elsewhere, the imported pack decodes with no file but its own
    assert load_vocabulary(imported).identity == load_vocabulary(vocabulary).identity
    result = runner.invoke(app, ["inspect", str(imported), "--decode", "0"])
    assert result.exit_code == 0, result.output
    assert corpus.read_text(encoding="utf-8")[:40] in result.output
