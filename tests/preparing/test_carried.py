"""The files a pack carries for its vocabulary: ``tokenizer.json`` is derived once per vocabulary and
cache, later packs copy the kept one, and a kept copy that does not check out (bytes that are not
the ones recorded, another vocabulary's, another version's, an unreadable record, another
vocabulary's bytes with their hash recomputed) is never carried: it is made again and replaced."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tokpack.vocab.bytelevel as bytelevel
from tokpack import GPT2_PATTERN, load_vocabulary, prepare
from tokpack.preparing.carried import KEPT_RECORD, TOKENIZER_JSON, kept_directory
from tokpack.vocab import BpeTokenizer

TEXT = "Ala ma kota, a kot ma Alę. The cat sat on the mat; 12345 + 678 = 13023.\n" * 40


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification stamps go to this test's own cache."""
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))


def vocabulary() -> BpeTokenizer:
    ranks = {bytes([b]): b for b in range(256)}
    for token in (b" m", b"at", b" ma", b"Al", b" k", b"ot", b" kot", b" c", b" cat", b"12"):
        ranks[token] = len(ranks)
    return BpeTokenizer(ranks=ranks, pattern=GPT2_PATTERN)


def prepared_pack(tmp_path: Path, out: str, *, derive: bool) -> Path:
    """A new pack of the corpus with :func:`vocabulary` (a fresh tokenizer each time, as a new
    process has), failing if tokenizer.json is derived when ``derive`` is false."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    real = bytelevel.tokenizer_json_bytes
    derived: list[int] = []

    def deriving(*args: object, **kwargs: object) -> bytes:
        derived.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bytelevel, "tokenizer_json_bytes", deriving)
        pack = prepare(corpus, vocab=vocabulary(), cache_dir=tmp_path / "cache", out=tmp_path / out, workers=1).tokens_dir
    assert bool(derived) == derive, "derived" if derived else "not derived"
    return pack


def carried(pack: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((pack / "vocabulary").iterdir())}


def test_a_second_pack_copies_the_kept_tokenizer_json(tmp_path: Path) -> None:
    first = prepared_pack(tmp_path, "first", derive=True)
    second = prepared_pack(tmp_path, "second", derive=False)
    assert carried(second) == carried(first)
    assert carried(first)[TOKENIZER_JSON] == vocabulary().files()[TOKENIZER_JSON]
    assert (first / "meta.json").read_bytes() == (second / "meta.json").read_bytes()


@pytest.mark.parametrize("damage", ["bytes", "identity", "version", "record", "forged"])
def test_a_kept_copy_that_does_not_check_out_is_made_again(tmp_path: Path, damage: str) -> None:
    first = prepared_pack(tmp_path, "first", derive=True)
    kept = kept_directory(vocabulary().identity, tmp_path / "cache")
    text, record_path = kept / TOKENIZER_JSON, kept / KEPT_RECORD
    record = json.loads(record_path.read_text(encoding="utf-8"))
    if damage == "bytes":  # changed after it was kept (the record's hash no longer matches)
        text.write_bytes(text.read_bytes().replace(b'"Al"', b'"lA"'))
    elif damage == "forged":  # another vocabulary's document, its hash recomputed: checked for what it means
        forged = text.read_bytes().replace(b'"Al"', b'"lA"')
        text.write_bytes(forged)
        record["sha256"] = hashlib.sha256(forged).hexdigest()
    elif damage == "identity":
        record["vocabulary"]["sha256"] = "0" * 64
    elif damage == "version":
        record["version"] += 1
    if damage == "record":
        record_path.write_text("{", encoding="utf-8")
    else:
        record_path.write_text(json.dumps(record), encoding="utf-8")
    second = prepared_pack(tmp_path, "second", derive=True)
    assert carried(second) == carried(first)
    third = prepared_pack(tmp_path, "third", derive=False)  # the copy was replaced by a good one
    assert carried(third) == carried(first)


def test_a_vocabulary_and_its_carried_files_load_no_compiler_regex_engine_or_tiktoken(tmp_path: Path,
                                                                                     gpt2_rank_file: Path) -> None:
    """What prepare does with a vocabulary besides encoding (read the rank file, its identity, the
    files a pack carries, kept or made) needs none of numba, the regex module or tiktoken: each
    costs a twentieth of a second to over half a second to import."""
    program = ("import sys; from pathlib import Path; from tokpack import load_vocabulary; "
               "from tokpack.preparing.carried import carried_files; "
               "tokenizer = load_vocabulary(sys.argv[1]); tokenizer.identity; "
               "carried_files(tokenizer, Path(sys.argv[2])); carried_files(load_vocabulary(sys.argv[1]), Path(sys.argv[2])); "
               "print(sorted({'numba', 'regex', 'tiktoken'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", program, str(gpt2_rank_file), str(tmp_path / "cache")],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    assert (kept_directory(load_vocabulary(gpt2_rank_file).identity, tmp_path / "cache") / TOKENIZER_JSON).is_file()
