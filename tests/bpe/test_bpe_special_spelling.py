"""The exact trainer's byte-level vocabularies never learn ``<|endoftext|>``'s spelling: it is
cut out of the text (``cut_out``) where the trainer gathers it, in memory (``train_fast``,
``train_bytelevel``), from files (``train_from_files``, ``tokpack bpe train``) and in threads or
worker processes alike, so the merges are those of the text between the spellings; Hugging Face's
trainer, which learns the spelling as text even when told it is special, is given the same text,
and the two learn the same tokens. The rules themselves (``train_fast`` without ``cut_out``) are
untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spelled_specials import EOT, SPACES_PATTERN, spelled_corpus, spelled_text
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
from typer.testing import CliRunner

from tokpack.bpe import train_bytelevel, train_fast, train_from_files
from tokpack.cli import app
from tokpack.errors import InputError
from tokpack.vocab import BpeTokenizer, train_hf_bytelevel
from tokpack.vocab.trainers import without_spellings


@pytest.fixture(scope="module")
def texts() -> list[str]:
    text = spelled_text()
    return [text[i : i + 20_000] for i in range(0, len(text), 20_000)]


def test_without_cut_out_the_rules_learn_the_spelling_and_as_tokenizer_refuses_it(texts: list[str]) -> None:
    training = train_fast(texts, 44, pattern=SPACES_PATTERN)
    assert EOT.encode() in training.ranks()  # the rules as they are: text is text
    with pytest.raises(InputError, match=r"merge \d+ spells '<\|endoftext\|>', the special token this vocabulary "
                                         r"numbers after its merges; train with cut_out=\('<\|endoftext\|>',\)"):
        training.as_tokenizer()


@pytest.mark.parametrize("pattern", [SPACES_PATTERN, "gpt2", None], ids=["regex", "compiled", "documents"])
@pytest.mark.parametrize("workers", [1, 2])
def test_cut_out_trains_on_the_text_between_the_spellings(texts: list[str], pattern: str | None, workers: int) -> None:
    cut = train_fast(texts, 60, pattern=pattern, cut_out=[EOT], workers=workers)
    assert cut == train_fast(list(without_spellings(texts)), 60, pattern=pattern, workers=workers)
    assert not any(EOT.encode() in token for token in cut.token_bytes())


def test_train_bytelevel_and_hugging_face_learn_the_same_tokens_and_neither_the_spelling(texts: list[str]) -> None:
    exact = train_bytelevel(texts, vocab_size=299, pattern=SPACES_PATTERN)
    hf = train_hf_bytelevel(texts, vocab_size=299, pattern=SPACES_PATTERN)
    assert set(exact.ranks) == set(hf.ranks) and len(exact.ranks) == 299
    assert EOT.encode() not in exact.ranks and exact.special_tokens == hf.special_tokens == {EOT: 299}
    for tokenizer in (exact, hf):
        hugging_face = Tokenizer.from_str(tokenizer.to_tokenizer_json())
        for text in (texts[0][:3000], f"x{EOT}y {EOT}\n"):
            assert hugging_face.encode(text, add_special_tokens=False).ids == tokenizer.encode(text)


def test_hugging_face_s_trainer_learns_a_special_token_s_spelling_as_text(texts: list[str]) -> None:
    """Why tokpack cuts for it: told the name is special, Hugging Face's trainer still counts its
    characters and merges them into its spelling (then keeps one id for it)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPACES_PATTERN), behavior="isolated"),
                                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=300, special_tokens=[EOT], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    assert EOT in ["".join(pair) for pair in merges]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("pattern", [SPACES_PATTERN, "gpt2"], ids=["regex", "compiled"])
def test_train_from_files_cuts_as_train_fast_does(tmp_path: Path, texts: list[str], pattern: str, workers: int) -> None:
    corpus = spelled_corpus(tmp_path / "corpus.txt")
    from_files = train_from_files(corpus, 60, pattern=pattern, cut_out=[EOT], workers=workers, document_bytes=20_000)
    in_memory = train_fast([corpus.read_text(encoding="utf-8")], 60, pattern=pattern, cut_out=[EOT])
    assert from_files.training.merges == in_memory.merges
    assert EOT.encode() not in from_files.training.ranks()


def test_bpe_train_never_learns_the_special_token(tmp_path: Path) -> None:
    corpus = spelled_corpus(tmp_path / "corpus.txt")
    result = CliRunner().invoke(app, ["bpe", "train", str(corpus), "-o", str(tmp_path / "vocab"), "--vocab-size", "300",
                                      "--pattern", SPACES_PATTERN])
    assert result.exit_code == 0, result.output
    tokenizer = BpeTokenizer.load_saved(tmp_path / "vocab" / "vocabulary.json")
    assert EOT.encode() not in tokenizer.ranks and tokenizer.special_tokens == {EOT: 299}
    tokenizer.to_tokenizer_json()  # writable: one id a spelling


def test_cut_out_is_checked() -> None:
    for bad in ("<|endoftext|>", [""], [3]):
        with pytest.raises(InputError, match="cut_out must be a sequence of non-empty strings"):
            train_fast(["abab"], 1, cut_out=bad)  # type: ignore[arg-type]
