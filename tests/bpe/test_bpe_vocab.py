"""Vocabularies from the exact trainer: tiktoken encoding, rank files, Hugging Face export, and
the outside oracles (rustbpe agrees merge for merge; Hugging Face diverges on ties)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bpe_data import real_texts
from tokenizers import Tokenizer

from tokpack import load_vocabulary
from tokpack.bpe import BpeTraining, train_bytelevel, train_fast
from tokpack.vocab import GPT2_PATTERN, GPT4_PATTERN, BpeTokenizer, train_hf_bytelevel


@pytest.fixture(scope="module")
def polish() -> list[str]:
    return real_texts("polish", 3_000_000)


@pytest.fixture(scope="module")
def trained(polish: list[str]) -> BpeTokenizer:
    return train_bytelevel(polish[::2], vocab_size=2048, pattern=GPT2_PATTERN)


def test_ranks_are_bytes_then_merges_in_order(polish: list[str]) -> None:
    training = train_fast(polish[::4], 300, pattern=GPT4_PATTERN, min_frequency=2)
    tokenizer = training.as_tokenizer()
    table = training.token_bytes()
    assert all(tokenizer.ranks[bytes([b])] == b for b in range(256))
    assert tokenizer.ranks[table[256 + 299]] == 256 + 299
    assert tokenizer.n_vocab == 256 + 300 + 1 and tokenizer.eot_id == 256 + 300


def test_encodes_held_out_text_losslessly_and_shorter_than_bytes(trained: BpeTokenizer, polish: list[str]) -> None:
    held_out = polish[1::2][:20] + ["Łódź  2026\t🙂\n", "Zażółć gęślą jaźń. <|endoftext|>"]
    for text in held_out:
        ids = trained.encode(text)
        assert trained.decode(ids) == text
    joined = "".join(held_out)
    assert len(trained.encode(joined)) < 0.5 * len(joined.encode("utf-8"))


def _assert_hugging_face_export_agrees(tokenizer: BpeTokenizer, texts: list[str]) -> None:
    hf = Tokenizer.from_str(tokenizer.to_tokenizer_json())
    for text in texts:
        assert hf.encode(text, add_special_tokens=False).ids == tokenizer.encode(text)


def test_hugging_face_export_gives_the_same_ids(trained: BpeTokenizer, polish: list[str]) -> None:
    texts = polish[1::2][:30] + real_texts("other", 200_000)[:20] + ["Łódź  2026\t🙂\n  \n\n x 1234567"]
    _assert_hugging_face_export_agrees(trained, texts)


def test_hugging_face_export_with_gpt4_pattern_cuts_digit_runs_like_tiktoken() -> None:
    # "34" alone is frequent, so a whole digit run and groups of three would encode "1234567"
    # differently: the export must cut numbers exactly as tiktoken does.
    tokenizer = train_bytelevel(["Rok 34 i 1234567."] * 50, vocab_size=300, pattern=GPT4_PATTERN)
    _assert_hugging_face_export_agrees(tokenizer, ["Rok 1234567, kod 00012345.", "1234567"])


def test_saved_vocabulary_and_rank_file_load_back(trained: BpeTokenizer, tmp_path: Path, polish: list[str]) -> None:
    trained.save(tmp_path / "vocab")
    loaded = load_vocabulary(tmp_path / "vocab")
    assert loaded.identity == trained.identity
    from_rank_file = load_vocabulary(tmp_path / "vocab" / "ranks.tiktoken", pattern=GPT2_PATTERN)
    assert from_rank_file.identity == trained.identity
    sample = polish[1][:5000]
    assert from_rank_file.encode(sample) == trained.encode(sample)


def test_rustbpe_learns_the_same_merges(polish: list[str]) -> None:
    rustbpe = pytest.importorskip("rustbpe", reason="rustbpe (PyPI, in the test extra) is the outside oracle")
    num_merges = 3000
    oracle = rustbpe.Tokenizer()
    oracle.train_from_iterator(iter(polish), 256 + num_merges, pattern=GPT4_PATTERN)
    # rustbpe keeps one (bytes, rank) per merge, duplicates spelled twice included.
    theirs = [token for token, rank in sorted(oracle.get_mergeable_ranks(), key=lambda item: item[1]) if rank >= 256]
    ours = train_fast(polish, num_merges, pattern=GPT4_PATTERN).token_bytes()[256:]
    assert len(ours) == num_merges
    assert ours == theirs


def test_hugging_face_trainer_breaks_ties_differently(polish: list[str]) -> None:
    """Not a bug to hide: HF's trainer orders tied pairs by its own alphabet, so its merge list
    leaves ours at the first tie it breaks the other way, and the tied token comes next in ours."""
    num_merges = 600
    training = train_fast(polish, num_merges, pattern=GPT2_PATTERN, min_frequency=2)
    ours = training.token_bytes()[256:]
    hf = train_hf_bytelevel(polish, vocab_size=256 + num_merges, min_frequency=2, pattern=GPT2_PATTERN)
    theirs = [token for token, rank in sorted(hf.ranks.items(), key=lambda item: item[1]) if rank >= 256]
    first = next(i for i, (mine, other) in enumerate(zip(ours, theirs)) if mine != other)
    assert 100 < first < num_merges  # on this corpus: merge 420, a three-way tie at count 680
    assert ours[:first] == theirs[:first]
    later = ours.index(theirs[first])
    assert later > first
    assert training.trace[later].frequency == training.trace[first].frequency


def test_two_merges_spelling_the_same_bytes_keep_the_first_rank() -> None:
    # (ab, c) and (a, bc) both spell "abc": the rank file can hold it once, at the first id.
    training = BpeTraining(merges=[(97, 98), (98, 99), (256, 99), (97, 257)], trace=[], pattern=GPT2_PATTERN)
    ranks = training.ranks()
    assert ranks[b"abc"] == 258 and 259 not in ranks.values()
    tokenizer = training.as_tokenizer()
    assert tokenizer.encode("abc") == [258]
    assert (tokenizer.eot_id, tokenizer.n_vocab) == (259, 260)  # <|endoftext|> follows the highest rank


def test_prepare_trains_with_the_exact_trainer(tmp_path: Path, polish: list[str]) -> None:
    import tokpack

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(polish[:3]), encoding="utf-8")
    prepared = tokpack.prepare(corpus, trainer="exact", vocab_size=600, cache_dir=tmp_path / "cache")
    tokenizer = prepared.tokenizer
    assert prepared.n_vocab == 600 and tokenizer.eot_id == 599
    # Lossless, and it compresses: the exact trainer made real merges.
    sample = polish[0][:2000]
    assert tokenizer.decode(tokenizer.encode(sample)) == sample
    assert len(tokenizer.encode(sample)) < 0.6 * len(sample.encode("utf-8"))
