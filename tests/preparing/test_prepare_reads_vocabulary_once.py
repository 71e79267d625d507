"""What makes ``prepare``'s fixed costs small, asserted as behaviour (no timings): a new pack's
verification tells its carried vocabulary's identity from the files' bytes, so the rank file is
parsed once per run, while an altered vocabulary is still refused (the carried
``tokenizer.json``'s merges: tests/vocab/test_merges.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import tokpack.vocab.bytelevel as bytelevel
import tokpack.vocab.loading as loading
import tokpack.vocab.rank_files as rank_files
from tokpack import GPT2_PATTERN, prepare
from tokpack.store import Pack, PackMeta
from tokpack.vocab import BpeTokenizer
from tokpack.vocab.identity import VocabIdentity


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification stamps go to this test's own cache."""
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))


TEXT = "Ala ma kota, a kot ma Alę. The cat sat on the mat; 12345 + 678 = 13023.\n" * 40


def small_ranks() -> dict[bytes, int]:
    """The 256 bytes and a few merges a test text uses (every merge buildable from lower ranks)."""
    ranks = {bytes([b]): b for b in range(256)}
    for token in (b" m", b"at", b" ma", b"Al", b" k", b"ot", b" kot", b" c", b" cat", b"12"):
        ranks[token] = len(ranks)
    return ranks


def test_a_new_pack_parses_its_rank_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vocabulary is parsed when it is loaded; the new pack's check of its carried copy reads
    the bytes it hashes instead of parsing them again."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    rank_file = tmp_path / "small.tiktoken"
    rank_file.write_bytes(rank_files.rank_file_lines(small_ranks()))
    parsed: list[object] = []
    original = rank_files.parse_rank_table

    def counting(text: bytes, *, where: object) -> tuple[rank_files.TokenTable, bool]:
        parsed.append(where)
        return original(text, where=where)  # type: ignore[arg-type]

    for module in (rank_files, bytelevel, loading):  # every module that parses rank text
        if hasattr(module, "parse_rank_table"):
            monkeypatch.setattr(module, "parse_rank_table", counting)
    prepared = prepare(corpus, vocab=rank_file, pattern=GPT2_PATTERN, cache_dir=tmp_path / "cache", workers=1)
    assert prepared.meta.n_tokens > 0
    assert len(parsed) == 1, parsed


def test_saved_as_tells_the_identity_from_the_bytes(tmp_path: Path) -> None:
    tokenizer = BpeTokenizer(ranks=small_ranks(), pattern=GPT2_PATTERN)
    saved = tokenizer.save(tmp_path / "vocab")
    assert BpeTokenizer.saved_as(saved, tokenizer.identity)
    other = VocabIdentity(scheme=tokenizer.identity.scheme, sha256=tokenizer.identity.sha256,
                          n_vocab=tokenizer.identity.n_vocab + 1)
    assert not BpeTokenizer.saved_as(saved, other)
    # The same ranks written in another order: not the canonical bytes, so only a parse can tell.
    ranks_file = saved.parent / "ranks.tiktoken"
    lines = ranks_file.read_bytes().splitlines(keepends=True)
    ranks_file.write_bytes(b"".join(reversed(lines)))
    record = json.loads(saved.read_text(encoding="utf-8"))
    record["ranks_sha256"] = hashlib.sha256(ranks_file.read_bytes()).hexdigest()
    saved.write_text(json.dumps(record), encoding="utf-8")
    assert not BpeTokenizer.saved_as(saved, tokenizer.identity)
    assert BpeTokenizer.load_saved(saved).identity == tokenizer.identity


def test_a_pack_whose_carried_ranks_differ_from_its_record_is_refused(tmp_path: Path) -> None:
    """The shortcut never accepts what the parse refused: a carried rank file changed (and its
    hashes in meta.json and vocabulary.json made to match) is another vocabulary."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    tokenizer = BpeTokenizer(ranks=small_ranks(), pattern=GPT2_PATTERN)
    pack = prepare(corpus, vocab=tokenizer, cache_dir=tmp_path / "cache", out=tmp_path / "pack", workers=1).tokens_dir
    ranks_file = pack / "vocabulary" / "ranks.tiktoken"
    swapped = dict(small_ranks())
    swapped[b" m"], swapped[b"at"] = swapped[b"at"], swapped[b" m"]
    ranks_file.write_bytes(rank_files.rank_file_lines(swapped))
    record_path = pack / "vocabulary" / "vocabulary.json"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["ranks_sha256"] = hashlib.sha256(ranks_file.read_bytes()).hexdigest()
    record_path.write_text(json.dumps(record), encoding="utf-8")
    meta_path = pack / "meta.json"  # re-hashed and resealed, as a careless tool (or an attacker) would
    meta = PackMeta.model_validate_json(meta_path.read_text(encoding="utf-8"))
    hashes = dict(meta.vocabulary_files)
    for name in ("vocabulary/ranks.tiktoken", "vocabulary/vocabulary.json"):
        hashes[name] = hashlib.sha256((pack / name).read_bytes()).hexdigest()
    meta_path.write_text(meta.model_copy(update={"vocabulary_files": hashes}).sealed().to_json())
    with pytest.raises(ValueError, match="identity does not match"):
        Pack(pack, verify=True)
