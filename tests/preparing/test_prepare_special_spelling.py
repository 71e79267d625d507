"""A vocabulary ``prepare`` trains never holds an ordinary token spelled as its special token: the
trainers learn from the text between ``<|endoftext|>``'s spellings, so the pack's ids are the
same from tiktoken, from Hugging Face's ``tokenizer.json`` and in the pack, and the pack passes its
own ``inspect --verify``, whichever trainer made it and however often the text spells it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from spelled_specials import EOT, SPACES_PATTERN, spelled_corpus, spelled_text
from tokenizers import Tokenizer
from typer.testing import CliRunner

import tokpack
from tokpack.cli import app
from tokpack.errors import InputError, SpecialTokenInText

runner = CliRunner()

#: Text that spells the special token inside, beside and across pieces.
PROBES = [f"Where are you going?\n{EOT}\nTo the river.", EOT, f"a{EOT}b {EOT}{EOT} <|endoftext", f"  {EOT}  \n"]


def _prepared(corpus: Path, cache: Path, trainer: str) -> tokpack.TokenizedCorpus:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecialTokenInText)  # said on purpose: no separator here
        return tokpack.prepare(corpus, pattern=SPACES_PATTERN, vocab_size=300, trainer=trainer,  # type: ignore[arg-type]
                               cache_dir=cache)


@pytest.mark.parametrize("trainer", ["exact", "hf"])
def test_a_text_spelling_the_special_token_trains_a_pack_that_passes_its_own_verify(tmp_path: Path, trainer: str) -> None:
    corpus = spelled_corpus(tmp_path / "corpus.txt")
    prepared = _prepared(corpus, tmp_path / "cache", trainer)
    tokenizer = prepared.tokenizer
    assert tokenizer.n_vocab == 300 and tokenizer.special_tokens == {EOT: 299}
    assert EOT.encode() not in tokenizer.ranks
    assert not any(b"<|endofte" in token or b"xt|>" in token for token in tokenizer.ranks)  # nor a part across the cut
    verified = runner.invoke(app, ["inspect", str(prepared.tokens_dir), "--verify"])
    assert verified.exit_code == 0 and "ok:" in verified.output, verified.output
    # Hugging Face's ids from the pack's own tokenizer.json are tiktoken's, and the pack's.
    hugging_face = Tokenizer.from_file(str(prepared.tokens_dir / "vocabulary" / "tokenizer.json"))
    for text in [*PROBES, spelled_text(5000)]:
        assert hugging_face.encode(text, add_special_tokens=False).ids == tokenizer.encode(text), text
    document = prepared.pack().document(0)[:2000].tolist()
    assert document == tokenizer.encode(corpus.read_text(encoding="utf-8"))[:2000]


def test_the_command_trains_the_same_consistent_vocabulary(tmp_path: Path) -> None:
    corpus = spelled_corpus(tmp_path / "corpus.txt")
    result = runner.invoke(app, ["prepare", str(corpus), "--pattern", SPACES_PATTERN, "--vocab-size", "300",
                                 "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "pack")])
    assert result.exit_code == 0, result.output
    verified = runner.invoke(app, ["inspect", str(tmp_path / "pack"), "--verify"])
    assert verified.exit_code == 0, verified.output
    assert EOT.encode() not in tokpack.load_vocabulary(tmp_path / "pack").ranks


def test_a_vocabulary_cached_by_a_trainer_that_learned_the_spelling_is_refused_then_never_reused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trainer that learns the spelling as text (as every trainer did when nothing was cut)
    caches a vocabulary whose tokenizer.json cannot be written: prepare refuses it, naming the
    token, its two ids and the fix, and writes no pack; the trainers as they are find another key
    in the cache, train again and make a pack that verifies."""
    from tokpack.preparing import preparation
    from tokpack.vocab import hf_trainer

    corpus = spelled_corpus(tmp_path / "corpus.txt")
    cache = tmp_path / "cache"
    with monkeypatch.context() as patched:
        patched.setattr(hf_trainer, "TRAINED_SPECIAL_TOKENS", ())
        patched.setattr(preparation, "TRAINED_SPECIAL_TOKENS", ())
        with pytest.raises(InputError, match=r"the ordinary token '<\|endoftext\|>' \(id \d+\) is spelled as the special "
                                             r"token '<\|endoftext\|>' \(id 299\): a tokenizer.json holds one id a "
                                             r"spelling.*; train the vocabulary again"):
            _prepared(corpus, cache, "hf")
    assert len(list((cache / "vocab").iterdir())) == 1
    assert not (cache / "packs").exists() or not any((cache / "packs").iterdir())
    prepared = _prepared(corpus, cache, "hf")
    assert EOT.encode() not in prepared.tokenizer.ranks and len(list((cache / "vocab").iterdir())) == 2
    assert runner.invoke(app, ["inspect", str(prepared.tokens_dir), "--verify"]).exit_code == 0
