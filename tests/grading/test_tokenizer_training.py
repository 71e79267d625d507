"""Training gives exactly the size asked for, all 256 bytes, and the same ids in tokenizers,
transformers and tiktoken; it refuses data that cannot reach the size. Small vocabularies keep
these tests fast; the shipped 8,192-id artifact is tested by loading it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import regex
from tokenizers import Tokenizer
from typer.testing import CliRunner

from tokpack import load_vocabulary
from tokpack.cli import app
from tokpack.grading.files import corpus_files, read_document
from tokpack.grading.torture import TORTURE_SET, check_round_trip
from tokpack.grading.training import (
    TrainingRecipe,
    parse_domain_weights,
    train_tokenizer,
    weighted_documents,
)
from tokpack.vocab import GPT4_PATTERN, BpeTokenizer
from tokpack.vocab.merge_files import byte_to_unicode
from tokpack.vocab.patterns import NAMED_PATTERNS

from tokenizer_fixtures import corpus, train_small  # noqa: F401 (corpus is a fixture)

runner = CliRunner()


@pytest.fixture(scope="module")
def trained(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_small(corpus, tmp_path_factory.mktemp("tok"), vocab_size=700, phrase_merges=80,
                       pattern=NAMED_PATTERNS["polish"])  # the phrase pattern extends the Polish one


def _texts(corpus: Path) -> list[str]:
    return [read_document(path) for path in corpus_files(corpus)]


def test_exact_size_all_bytes_no_normalizer(trained: Path) -> None:
    hf = Tokenizer.from_file(str(trained))
    assert hf.get_vocab_size(with_added_tokens=True) == 700
    vocab = hf.get_vocab(with_added_tokens=True)
    assert all(char in vocab for char in byte_to_unicode().values())
    assert vocab["<|endoftext|>"] == 699
    document = json.loads(trained.read_text(encoding="utf-8"))
    assert document["normalizer"] is None
    assert document["decoder"]["type"] == "ByteLevel"


def test_same_ids_in_tokenizers_tiktoken_and_transformers(trained: Path, corpus: Path) -> None:
    transformers = pytest.importorskip("transformers")
    hf = Tokenizer.from_file(str(trained))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(trained))
    rank_file_side = load_vocabulary(trained.parent / "vocabulary.json")
    json_side = load_vocabulary(trained)
    assert rank_file_side.identity == json_side.identity  # one vocabulary, two files
    texts = _texts(corpus) + [case.text for case in TORTURE_SET if "<|" not in case.text]
    hf_ids = [encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]
    assert hf_ids == rank_file_side.encode_batch(texts)
    assert hf_ids == [fast(text, add_special_tokens=False)["input_ids"] for text in texts]
    assert len(fast) == 700


def test_phrase_stage_learns_multi_word_tokens_and_stays_lossless(trained: Path, corpus: Path) -> None:
    tokenizer = load_vocabulary(trained)
    assert any(b" " in token.strip(b" \n") for token in tokenizer.ranks), "no token spans two words"
    report = check_round_trip(trained, TORTURE_SET)
    assert report.passed, report.failures


def test_training_is_deterministic(corpus: Path) -> None:
    texts, _ = weighted_documents([corpus], {})
    recipe = TrainingRecipe(vocab_size=400)
    assert train_tokenizer(texts, recipe).identity == train_tokenizer(texts, recipe).identity


def test_data_too_small_for_the_size_is_an_error_not_a_smaller_file() -> None:
    with pytest.raises(ValueError, match="reaches only .* of the 1,000"):
        train_tokenizer(["abab abab", "baba"], TrainingRecipe(vocab_size=1000))


def test_domain_weights_repeat_documents(corpus: Path) -> None:
    plain, used = weighted_documents([corpus], {})
    doubled, _ = weighted_documents([corpus], {"code": 2})
    halved, halved_used = weighted_documents([corpus], {"code": 0.5})
    assert len(doubled) == len(plain) + 6 and len(halved) == len(plain) - 3
    assert {domain for _, domain in used} == {"code", "narrative"}
    assert len(halved_used) == len(used) - 3
    with pytest.raises(ValueError, match="no domain 'poetry'"):
        weighted_documents([corpus], {"poetry": 2})
    assert parse_domain_weights("code=2, technical=0.5") == {"code": 2.0, "technical": 0.5}
    with pytest.raises(ValueError, match="expected domain=number"):
        parse_domain_weights("code:2")


@pytest.mark.parametrize("name", sorted(NAMED_PATTERNS))
def test_named_patterns_cut_the_same_in_both_regex_engines(name: str) -> None:
    """Oniguruma (tokenizers) and `regex` (as tiktoken) must agree, or ids would differ."""
    from tokenizers import Regex, pre_tokenizers

    split = pre_tokenizers.Split(Regex(NAMED_PATTERNS[name]), behavior="isolated")
    for case in TORTURE_SET:
        text = case.text[:3000]
        assert [piece for piece, _ in split.pre_tokenize_str(text)] == regex.findall(NAMED_PATTERNS[name], text), case.name


def test_gpt4_possessive_digit_groups_cut_differently_in_oniguruma() -> None:
    """Why GPT4_PATTERN writes {1,3} and not tiktoken's {1,3}+: Oniguruma reads the latter as
    'one or more groups of one to three', so Hugging Face would keep long digit runs whole."""
    from tokenizers import Regex, pre_tokenizers

    tiktoken_spelling = GPT4_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}{1,3}+")
    assert tiktoken_spelling != GPT4_PATTERN
    for pattern, hugging_face in ((tiktoken_spelling, ["123456"]), (GPT4_PATTERN, ["123", "456"])):
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
        assert regex.findall(pattern, "123456") == ["123", "456"]
        assert [piece for piece, _ in split.pre_tokenize_str("123456")] == hugging_face


def test_exact_trainer_gives_the_size_asked_for(corpus: Path) -> None:
    texts, _ = weighted_documents([corpus], {})
    tokenizer = train_tokenizer(texts, TrainingRecipe(vocab_size=400, trainer="exact"))
    assert isinstance(tokenizer, BpeTokenizer) and tokenizer.n_vocab == 400


def test_train_cli_writes_tokenizer_rank_file_and_manifest(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "tok" / "tokenizer.json"
    result = runner.invoke(app, ["tokenizer", "train", str(corpus), "-o", str(out), "--vocab-size", "500",
                                 "--domain-weights", "code=2"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.parent.iterdir()) == ["manifest.json", "ranks.tiktoken", "special_tokens_map.json",
                                                         "tokenizer.json", "tokenizer_config.json", "vocabulary.json"]
    manifest = json.loads((out.parent / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["recipe"]["domain_weights"] == {"code": 2.0}
    assert manifest["licences"] == {"GPL-2+": 4, "MIT": 6}  # fortunes-pl narrative, django-bpp code
    assert Tokenizer.from_file(str(out)).get_vocab_size(with_added_tokens=True) == 500


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--vocab-size", "100"], "--vocab-size"),
        (["--pattern", "(unclosed"], "does not compile"),
        (["--trainer", "fast"], "'fast' is not one of"),
        (["--domain-weights", "code=x"], "expected domain=number"),
    ],
)
def test_train_cli_bad_input_is_one_line_and_exit_2(corpus: Path, tmp_path: Path, arguments: list[str], message: str) -> None:
    result = runner.invoke(app, ["tokenizer", "train", str(corpus), "-o", str(tmp_path / "t.json"), *arguments])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("trainer", ["exact", "hf"])
@pytest.mark.parametrize("phrase_merges", [0, 20])
def test_a_recipe_never_learns_the_special_token_s_spelling(trainer: str, phrase_merges: int) -> None:
    """Both stages learn from the text between ``<|endoftext|>``'s spellings: no word or phrase
    token spells it, so the tokenizer.json holds it once and Hugging Face's ids are tiktoken's."""
    from spelled_specials import EOT, SPACES_PATTERN, spelled_text

    text = spelled_text(200_000)
    recipe = TrainingRecipe(vocab_size=300 + phrase_merges, trainer=trainer, pattern=SPACES_PATTERN,  # type: ignore[arg-type]
                            phrase_merges=phrase_merges, phrase_pattern=r" ?\S+(?: \S+)?|\s+")
    tokenizer = train_tokenizer([text[i : i + 10_000] for i in range(0, len(text), 10_000)], recipe)
    assert EOT.encode() not in tokenizer.ranks and tokenizer.special_tokens == {EOT: 299 + phrase_merges}
    hf = Tokenizer.from_str(tokenizer.to_tokenizer_json())
    for probe in (text[:3000], f"x{EOT}y {EOT} {EOT}\n"):
        assert hf.encode(probe, add_special_tokens=False).ids == tokenizer.encode(probe)
