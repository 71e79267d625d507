"""The files a pack carries for its vocabulary are derived from the vocabulary in every `prepare`
(never copied from a cache), and, made in the same process, are not read back to be checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tokpack.vocab.loading as loading
from tokpack import GPT2_PATTERN, Pack, prepare
from tokpack.vocab import BpeTokenizer

TEXT = "Ala ma kota, a kot ma Alę. The cat sat on the mat; 12345 + 678 = 13023.\n" * 40


def vocabulary() -> BpeTokenizer:
    ranks = {bytes([b]): b for b in range(256)}
    for token in (b" m", b"at", b" ma", b"Al", b" k", b"ot", b" kot", b" c", b" cat", b"12"):
        ranks[token] = len(ranks)
    return BpeTokenizer(ranks=ranks, pattern=GPT2_PATTERN)


def test_a_pack_carries_its_vocabularys_own_files_without_reading_them_back(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a tokenizer.json back costs over a second for 100k ids: a pack written here does
    not pay it (a later open in another process checks the files against the identity)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("prepare read a carried tokenizer.json back")

    with monkeypatch.context() as patch:
        patch.setattr(loading, "load_vocabulary", refused)
        pack = prepare(corpus, vocab=vocabulary(), cache_dir=tmp_path / "cache", out=tmp_path / "out", workers=1).tokens_dir
    carried = {path.name: path.read_bytes() for path in sorted((pack / "vocabulary").iterdir())}
    assert carried == dict(sorted(vocabulary().files().items()))
    Pack(pack, verify=True).verify_vocabulary_files()


def test_a_vocabulary_and_its_carried_files_load_no_compiler_regex_engine_or_tiktoken(gpt2_rank_file: Path) -> None:
    """What prepare does with a vocabulary besides encoding (read the rank file, its identity, the
    files a pack carries) needs none of numba, the regex module or tiktoken: each costs a
    twentieth of a second to over half a second to import."""
    program = ("import sys; from tokpack import load_vocabulary; "
               "tokenizer = load_vocabulary(sys.argv[1]); tokenizer.identity; tokenizer.files(); "
               "print(sorted({'numba', 'regex', 'tiktoken'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", program, str(gpt2_rank_file)], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
