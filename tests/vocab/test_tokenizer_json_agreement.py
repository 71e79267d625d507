"""A vocabulary's ``tokenizer.json`` gives Hugging Face's ids as tokpack gives them: a special token
spelled in text stays text, a pack made from the file has the file's ids, ``transformers`` loads it
with its end-of-text and padding tokens, and merges that contradict the ids are refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_runs import EOT, prepare_json
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.vocab import BpeTokenizer

from conftest import DATA, REPO
from tokenizer_fixtures import narrative_texts

runner = CliRunner()


SPELLED = ["hello <|endoftext|>", "<|endoftext|>", "a<|endoftext|>b <|endoftext|>\n", "zażółć <|endoftext|> gęślą"]


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small vocabulary trained by ``tokpack tokenizer train``: its folder (tokenizer.json,
    ranks.tiktoken, vocabulary.json, the transformers files)."""
    folder = tmp_path_factory.mktemp("train")
    (folder / "text").mkdir()
    for index, text in enumerate(narrative_texts()[:20]):
        (folder / "text" / f"{index:02d}.txt").write_text(text, encoding="utf-8")
    out = folder / "out" / "tokenizer.json"
    result = runner.invoke(app, ["tokenizer", "train", str(folder / "text"), "-o", str(out), "--vocab-size", "400"])
    assert result.exit_code == 0, result.output
    return out.parent


def test_hugging_face_never_reads_the_special_token_from_text(trained: Path) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from tokpack import load_vocabulary

    ours = BpeTokenizer.load_saved(trained / "vocabulary.json")
    hf = Tokenizer.from_file(str(trained / "tokenizer.json"))
    fast = AutoTokenizer.from_pretrained(str(trained))
    for text in SPELLED:
        assert hf.encode(text, add_special_tokens=False).ids == ours.encode(text), text
        assert fast(text, add_special_tokens=False)["input_ids"] == ours.encode(text), text
    # The special token is still there, by name, and tokpack reads the file back as the same vocabulary.
    eot = ours.eot_id
    assert hf.token_to_id(EOT) == eot and fast.eos_token_id == eot and hf.decode([eot]) == EOT
    assert load_vocabulary(trained / "tokenizer.json").identity == ours.identity
    # Through the API's own export too.
    assert Tokenizer.from_str(ours.to_tokenizer_json()).encode(SPELLED[0]).ids == ours.encode(SPELLED[0])


def test_a_pack_from_tokenizer_json_has_hugging_faces_ids(tmp_path: Path, trained: Path) -> None:
    from tokenizers import Tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(SPELLED), encoding="utf-8")
    made = prepare_json(corpus, "--vocab", trained / "tokenizer.json", "--cache-dir", tmp_path / "c", "-o", tmp_path / "pack")
    assert made["n_docs"] == 1
    ids = np.load(tmp_path / "pack" / "tokens.npy").tolist()
    assert ids == Tokenizer.from_file(str(trained / "tokenizer.json")).encode("".join(SPELLED)).ids


def test_encode_arrays_takes_a_lone_surrogate_as_encode_does(trained: Path) -> None:
    ours = BpeTokenizer.load_saved(trained / "vocabulary.json")
    texts = ["a\ud800b", "\udfff", "zażółć\ud83d gęślą", "fine"]
    assert [array.tolist() for array in ours.encode_arrays(texts, num_threads=2)] == [ours.encode(t) for t in texts]
    assert [array.tolist() for array in ours.encode_arrays(texts[:1], num_threads=1)] == [ours.encode(texts[0])]


def test_a_tokenizer_json_whose_merges_contradict_its_ids_is_refused(tmp_path: Path, trained: Path) -> None:
    document = json.loads((trained / "tokenizer.json").read_text(encoding="utf-8"))
    vocab, merges = document["model"]["vocab"], document["model"]["merges"]
    made = ["".join(merge) if isinstance(merge, list) else merge.replace(" ", "") for merge in merges]
    first, second = made[10], made[40]  # two merged tokens' ids swapped
    vocab[first], vocab[second] = vocab[second], vocab[first]
    bad = tmp_path / "swapped" / "tokenizer.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(narrative_texts()[0], encoding="utf-8")
    result = runner.invoke(app, ["prepare", str(corpus), "--vocab", str(bad), "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2, result.output
    assert str(bad) in result.output and "merge 11 " in result.output and "contradict" in result.output, result.output
    # The file as trained is accepted.
    assert prepare_json(corpus, "--vocab", trained / "tokenizer.json", "--cache-dir", tmp_path / "c")["n_docs"] == 1


def test_an_exported_tokenizer_loads_in_transformers_with_eos_and_pad(tmp_path: Path) -> None:
    import transformers

    from tokpack import load_vocabulary

    corpus = tmp_path / "train" / "dialogue"
    corpus.mkdir(parents=True)
    for source in sorted((DATA / "polish" / "dialogue").glob("*.txt"))[:3]:
        (corpus / source.name).write_bytes(source.read_bytes()[:40_000])
    out = tmp_path / "tok" / "tokenizer.json"
    made = runner.invoke(app, ["tokenizer", "train", str(tmp_path / "train"), "-o", str(out), "--vocab-size", "400"])
    assert made.exit_code == 0, made.output
    ours = load_vocabulary(out)
    for folder in (out.parent, REPO / "artifacts" / "polish-8192"):
        fast = transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))
        eot = len(fast) - 1
        assert (fast.eos_token, fast.pad_token, fast.eos_token_id, fast.pad_token_id) == ("<|endoftext|>", "<|endoftext|>", eot, eot)
        auto = transformers.AutoTokenizer.from_pretrained(str(folder))
        assert auto.pad_token_id == eot
        text = "Zażółć  gęślą jaźń 🙂\r\n\tx  ."
        ids = fast(text, add_special_tokens=False)["input_ids"]
        assert fast.decode(ids) == text  # no clean-up of spaces: the text comes back
        if folder == out.parent:
            assert ids == ours.encode(text)
        batch = fast(["a", "ab cd ef"], padding=True)["input_ids"]
        assert batch[0][-1] == eot and len(batch[0]) == len(batch[1])
