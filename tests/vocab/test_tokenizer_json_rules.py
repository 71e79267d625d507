"""A ``tokenizer.json`` means what Hugging Face means: tokpack encodes one only where tiktoken's
rank rule gives Hugging Face's ids, and refuses the rest saying why. The real ``tokenizers``
library is the oracle, on trained and on extended vocabularies (merges appended after training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.corpus import sample_corpus
from tokpack.errors import InputError
from tokpack.vocab.loading import load_vocabulary
from tokpack.vocab.merge_files import byte_to_unicode, unicode_to_bytes
from tokpack.vocab.patterns import GPT4_PATTERN

ALPHABET = byte_to_unicode()
SAMPLE_LINES = [line for line in sample_corpus().read_text(encoding="utf-8").splitlines() if line.strip()][:200]


def bytes_only(merges: list[list[str]], extra: dict[str, int], *, ignore_merges: bool = False) -> dict[str, object]:
    """A byte-level tokenizer.json of the 256 bytes, ``extra`` tokens and ``merges``, cut on
    whitespace."""
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"\S+|\s+"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                  "vocab": {ALPHABET[b]: b for b in range(256)} | extra, "merges": merges},
    }


def write(document: dict[str, object], path: Path) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def hugging_face(path: Path, text: str) -> list[int]:
    ids: list[int] = Tokenizer.from_file(str(path)).encode(text).ids
    return ids


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A tokenizer.json trained by Hugging Face's own trainer on the sample (GPT-4's pattern)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT4_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(SAMPLE_LINES, trainers.BpeTrainer(
        vocab_size=420, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    path = tmp_path_factory.mktemp("trained") / "tokenizer.json"
    tokenizer.save(str(path))
    document: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_merges_the_rank_rule_would_not_make_are_refused_with_the_reason(tmp_path: Path) -> None:
    """``[a b, b c, a bc]``: Hugging Face gives ``abc`` as ``[ab, c]`` (no merge joins ``ab`` and
    ``c``), tiktoken's rank rule as ``[abc]``."""
    path = write(bytes_only([["a", "b"], ["b", "c"], ["a", "bc"]], {"ab": 256, "bc": 257, "abc": 258}),
                 tmp_path / "tokenizer.json")
    assert hugging_face(path, "abc") == [256, 99]
    with pytest.raises(InputError, match=r"merge 3 \('a bc'\) makes 'abc', which tiktoken's rank rule makes from "
                                         r"'ab' \+ 'c': Hugging Face merges only listed pairs") as refused:
        load_vocabulary(path)
    assert "tokpack import" in str(refused.value) and "'ab c'" in str(refused.value)
    (tmp_path / "corpus.txt").write_text("abc abc\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["prepare", str(tmp_path / "corpus.txt"), "--vocab", str(path),
                                      "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "merge 3" in result.output and not (tmp_path / "cache" / "packs").exists()


def test_a_token_made_twice_is_refused(tmp_path: Path) -> None:
    path = write(bytes_only([["a", "b"], ["b", "c"], ["ab", "c"], ["a", "bc"]], {"ab": 256, "bc": 257, "abc": 258}),
                 tmp_path / "tokenizer.json")
    with pytest.raises(InputError, match=r"merge 4 \('a bc'\) makes 'abc' again \(merge 3 made it\)"):
        load_vocabulary(path)


def test_ignore_merges_with_a_token_only_it_makes_is_refused(tmp_path: Path) -> None:
    """Llama-3's setting: Hugging Face takes a word that is one token whole. ``abc`` is in the
    vocabulary but no merge makes it: Hugging Face gives the word ``abc`` as ``[abc]``, which the
    rank rule cannot (it would make ``abc`` inside longer words too)."""
    extra = {"ab": 256, "abc": 257}
    path = write(bytes_only([["a", "b"]], extra, ignore_merges=True), tmp_path / "tokenizer.json")
    assert hugging_face(path, "abc") == [257] and hugging_face(path, "abcd") == [256, 99, 100]
    with pytest.raises(InputError, match="model.ignore_merges is true and no merge makes 'abc' \\(id 257\\)"):
        load_vocabulary(path)
    # Without the setting, Hugging Face never makes abc from text, nor does tokpack (a special token).
    plain = write(bytes_only([["a", "b"]], extra), tmp_path / "plain.json")
    for text in ("abc", "abcd", "ab abc c"):
        assert load_vocabulary(plain).encode(text) == hugging_face(plain, text)


def test_ignore_merges_is_honoured_where_it_changes_nothing(trained: dict[str, object], tmp_path: Path) -> None:
    """Every token made by the merges its ids imply: a whole word in the vocabulary is the token
    the merges make of it, so Hugging Face's ids with the setting are tiktoken's rank rule's."""
    model = trained["model"]
    assert isinstance(model, dict)
    path = write(trained | {"model": model | {"ignore_merges": True}}, tmp_path / "tokenizer.json")
    vocabulary = load_vocabulary(path)
    for line in SAMPLE_LINES[:80]:
        assert vocabulary.encode(line) == hugging_face(path, line), line


def _spelled(tokens: list[str]) -> str:
    return b"".join(unicode_to_bytes(token, where="test") for token in tokens).decode("utf-8", errors="ignore")


def test_extended_vocabularies_are_encoded_as_hugging_face_does_or_refused(trained: dict[str, object],
                                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    """Merges appended after training, as people extend a vocabulary: whenever tokpack accepts
    the file, its ids are Hugging Face's, on the sample and on text spelling the new tokens;
    otherwise it refuses it. Both happen."""
    model = trained["model"]
    assert isinstance(model, dict)
    vocab: dict[str, int] = model["vocab"]
    tokens = [token for token in sorted(vocab, key=vocab.__getitem__) if token != "<|endoftext|>"]
    # Joins the rank rule makes otherwise: a token ending in x, then y, where the trained
    # vocabulary joins x and y with a lower id than the token's (most random joins agree).
    crossing = [(left, right) for left in tokens for right in tokens[:256]
                if left[-1] + right in vocab and vocab[left[-1] + right] < vocab[left] and left + right not in vocab]
    outcomes: list[bool] = []
    folder = tmp_path_factory.mktemp("extended")
    pick = st.one_of(st.tuples(st.sampled_from(tokens), st.sampled_from(tokens)), st.sampled_from(crossing))

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(picks=st.lists(pick, min_size=1, max_size=4), ignore_merges=st.booleans())
    def check(picks: list[tuple[str, str]], ignore_merges: bool) -> None:
        extended, merges, added = dict(vocab), [list(pair) for pair in model["merges"]], []
        for left, right in picks:
            made = left + right
            if made in extended:
                continue
            extended[made] = len(extended)
            merges.append([left, right])
            added.append(made)
        path = write(trained | {"model": model | {"vocab": extended, "merges": merges, "ignore_merges": ignore_merges}},
                     folder / f"tokenizer-{len(outcomes)}.json")
        try:
            vocabulary = load_vocabulary(path)
        except InputError as error:
            assert "rank rule" in str(error)
            outcomes.append(False)
            return
        outcomes.append(True)
        texts = [*SAMPLE_LINES[:10], _spelled(added), " ".join(_spelled([token]) for token in added),
                 _spelled(added * 2) + " " + SAMPLE_LINES[0]]
        for text in texts:
            assert vocabulary.encode(text) == hugging_face(path, text), (picks, text)

    check()
    assert True in outcomes and False in outcomes, outcomes


def test_two_tokens_of_one_id_name_the_file_the_id_and_both_tokens(tmp_path: Path) -> None:
    source = Path(__file__).parents[2] / "artifacts" / "polish-8192" / "tokenizer.json"
    document = json.loads(source.read_text(encoding="utf-8"))
    vocab = document["model"]["vocab"]
    token, other = list(vocab)[300], list(vocab)[299]
    vocab[token] = vocab[other]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(InputError, match=f"{path}: id {vocab[other]} is both {other!r} and {token!r}.*; give each token its own id"):
        load_vocabulary(path)
