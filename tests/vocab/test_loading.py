"""Loading a vocabulary (:func:`tokpack.load_vocabulary`): a rank file and the ``tokenizer.json`` of one
tokenizer give byte-identical packs, a bare rank file's pattern is asked for and never guessed, a
published rank file brings its own pattern and special tokens, and ``prepare`` parses and hashes a
rank file once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_runs import cli_json, cli_refused, polish_corpus_in
from typer.testing import CliRunner

from tokpack import load_vocabulary, prepare
from tokpack.errors import InputError
from tokpack.vocab import GPT2_PATTERN, GPT4_PATTERN

from conftest import DATA, REPO

runner = CliRunner()
ARTIFACT = REPO / "artifacts" / "polish-8192"
def test_a_rank_file_and_the_tokenizer_json_of_one_tokenizer_give_byte_identical_packs(tmp_path: Path) -> None:
    corpus = polish_corpus_in(tmp_path / "a")
    packs = {}
    for name, vocab in (("ranks", ARTIFACT / "ranks.tiktoken"), ("json", ARTIFACT / "tokenizer.json")):
        made = cli_json("prepare", str(corpus), "--vocab", str(vocab), "-o", str(tmp_path / name), "--cache-dir", str(tmp_path / "c"))
        packs[name] = {str(p.relative_to(made["pack"])): p.read_bytes() for p in sorted(Path(made["pack"]).rglob("*"))
                       if p.is_file()}
    assert packs["ranks"] == packs["json"] and "tokens.npy" in packs["ranks"]
    # A rank file alone records no pattern: never guessed, asked for, then equal with the right one.
    bare = tmp_path / "bare" / "ranks.tiktoken"
    bare.parent.mkdir()
    shutil.copy(ARTIFACT / "ranks.tiktoken", bare)
    message = cli_refused("prepare", str(corpus), "--vocab", str(bare), "--cache-dir", str(tmp_path / "c"))
    assert "--pattern" in message and "gpt4" in message and "polish" in message and str(bare) in message
    named = cli_json("prepare", str(corpus), "--vocab", str(bare), "--pattern", "polish-phrase", "-o", str(tmp_path / "named"),
                "--cache-dir", str(tmp_path / "c"))
    assert (Path(named["pack"]) / "tokens.npy").read_bytes() == packs["ranks"]["tokens.npy"]
    assert named["vocabulary"] == json.loads(packs["ranks"]["meta.json"])["vocabulary"]


def test_a_published_rank_file_brings_its_own_pattern_and_special_tokens(gpt2_rank_file: Path) -> None:
    gpt2 = load_vocabulary(gpt2_rank_file)
    assert gpt2.pattern == GPT2_PATTERN and gpt2.special_tokens == {"<|endoftext|>": 50256} and gpt2.n_vocab == 50257
    with pytest.raises(InputError, match="r50k_base"):
        load_vocabulary(gpt2_rank_file, pattern=GPT4_PATTERN)


def test_prepare_with_a_rank_file_parses_it_once_and_hashes_it_once(tmp_path: Path, monkeypatch, gpt2_rank_file: Path) -> None:
    import tokpack.vocab.bytelevel as bytelevel
    import tokpack.vocab.loading as loading
    import tokpack.vocab.rank_files as rank_files

    calls = {"parse": 0, "canonical": 0}
    parse, canonical = rank_files.parse_rank_table, bytelevel.BpeTokenizer.canonical_bytes

    def counting_parse(text: bytes, *, where: object) -> tuple[rank_files.TokenTable, bool]:
        calls["parse"] += where == gpt2_rank_file  # the user's file (a pack's own copy is read to verify it)
        return parse(text, where=where)

    def counting_canonical(self: bytelevel.BpeTokenizer) -> bytes:
        calls["canonical"] += 1
        return canonical(self)

    for module in (rank_files, loading, bytelevel):
        if hasattr(module, "parse_rank_table"):
            monkeypatch.setattr(module, "parse_rank_table", counting_parse)
    monkeypatch.setattr(bytelevel.BpeTokenizer, "canonical_bytes", counting_canonical)
    corpus = tmp_path / "c.txt"
    corpus.write_bytes((DATA / "other" / "english" / "wesnoth-narrative-en.txt").read_bytes()[:50_000])
    for run in ("first", "cached"):
        calls.update(parse=0, canonical=0)
        prepared = prepare(corpus, vocab=gpt2_rank_file, cache_dir=tmp_path / "cache")
        assert prepared.n_vocab == 50257 and prepared.meta.n_tokens > 0
        # Hashed once for the request; once more when the new pack's carried vocabulary is checked
        # against its record on first verification (the cached run's stamp skips that).
        assert calls["parse"] == 1 and 1 <= calls["canonical"] <= 2, (run, calls)


def test_a_packs_ids_given_as_the_vocabulary_are_refused_naming_the_packs_folder(tmp_path: Path) -> None:
    """A pack's ``tokens.npy`` given where its vocabulary was meant is named as the NumPy array it
    is, with the pack's folder as the fix (it was read as a rank file, "line 1: expected ...")."""
    pack = prepare(polish_corpus_in(tmp_path), vocab_size=300, out=tmp_path / "pack").tokens_dir
    with pytest.raises(InputError) as refused:
        load_vocabulary(pack / "tokens.npy")
    message = str(refused.value)
    assert message.startswith(f"{pack / 'tokens.npy'}: a NumPy array") and "the pack's folder" in message
    assert "--vocab" not in message
    assert "NumPy array" in cli_refused("prepare", str(polish_corpus_in(tmp_path)), "--vocab", str(pack / "starts.npy"),
                                        "-o", str(tmp_path / "again"))
    assert load_vocabulary(pack).ranks == load_vocabulary(pack / "vocabulary").ranks


def test_a_folder_without_a_vocabulary_names_what_to_give(tmp_path: Path) -> None:
    """A folder that is no pack, dataset or export and holds no ``vocabulary.json`` is refused as
    the folder it is, naming what a vocabulary can be."""
    folder = tmp_path / "licenses"
    folder.mkdir()
    (folder / "GPL-3").write_text("GNU GENERAL PUBLIC LICENSE\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        load_vocabulary(folder)
    message = str(refused.value)
    assert message.startswith(f"{folder}: ") and "vocabulary.json" in message
    assert "rank file" in message and "tokenizer.json" in message and "pack" in message


def test_a_vocabulary_folder_whose_rank_file_is_a_fifo_is_refused_never_opened(tmp_path: Path) -> None:
    """A saved vocabulary (``vocabulary.json`` and its rank file) whose rank file is a FIFO would
    block the load for ever: refused, unread."""
    from fifos import feeding_fifo

    from tokpack.vocab.bytelevel import BpeTokenizer

    BpeTokenizer(ranks={bytes([b]): b for b in range(256)} | {b"ab": 256}).save(tmp_path / "vocab")
    ranks = tmp_path / "vocab" / "ranks.tiktoken"
    with feeding_fifo(ranks, ranks.read_bytes()) as opened:  # a reader that opened it would get the right bytes
        with pytest.raises(InputError, match=r"ranks\.tiktoken: not a regular file \(a FIFO\)"):
            load_vocabulary(tmp_path / "vocab")
    assert not opened, "the FIFO was opened"


def test_a_save_stopped_while_writing_the_rank_file_leaves_the_saved_vocabulary_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tokpack bpe train -o DIR`` saves into DIR itself: a Ctrl-C while the rank file is written
    must leave the vocabulary saved there before whole (a reader never sees half a rank file)."""
    from tokpack.vocab import BpeTokenizer

    single = {bytes([b]): b for b in range(256)}
    before = BpeTokenizer(ranks=single | {b"ab": 256}, pattern=GPT2_PATTERN)
    after = BpeTokenizer(ranks=single | {b"ab": 256, b"abab": 257}, pattern=GPT2_PATTERN)
    saved = before.save(tmp_path / "vocab")
    write_bytes = Path.write_bytes

    def stopped_halfway(path: Path, data: bytes) -> int:  # type: ignore[override]
        if data == after.rank_lines:
            write_bytes(path, data[: len(data) // 2])
            raise KeyboardInterrupt
        return write_bytes(path, data)

    monkeypatch.setattr(Path, "write_bytes", stopped_halfway)
    with pytest.raises(KeyboardInterrupt):
        after.save(tmp_path / "vocab")
    monkeypatch.undo()
    assert load_vocabulary(saved).identity == before.identity
    assert sorted(path.name for path in (tmp_path / "vocab").iterdir()) == ["ranks.tiktoken", "vocabulary.json"]
