"""Byte-level vocabularies: loading, identity, refusals, and GPT-2 parity with tiktoken."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import tiktoken
from rank_files import read_ranks
from tiktoken_ext.openai_public import r50k_pat_str
from tokenizers import Tokenizer
from tokenizers.models import BPE
from tokenizers.pre_tokenizers import ByteLevel

from tokpack import GPT2_PATTERN, GPT4_PATTERN, BpeTokenizer, load_vocabulary, require_vocabulary, tokenizer_for
from tokpack.errors import InputError
from tokpack.vocab.merge_files import byte_to_unicode, derive_merges
from tokpack.vocab.rank_files import rank_file_lines

BYTES = {bytes([b]): b for b in range(256)}


def small_vocabulary(pattern: str = GPT2_PATTERN) -> BpeTokenizer:
    return BpeTokenizer(ranks=BYTES | {b"ab": 256, b"abc": 257, b" a": 258}, pattern=pattern)


def real_text(shared_data: Path) -> str:
    english = (shared_data / "other" / "english" / "wesnoth-narrative-en.txt").read_text(encoding="utf-8")
    polish = (shared_data / "polish" / "technical").glob("*.txt")
    return english[:200_000] + "".join(p.read_text(encoding="utf-8")[:20_000] for p in sorted(polish)[:10])


def test_identity_is_stable_and_names_every_id_changing_part() -> None:
    base = small_vocabulary()
    assert base.identity == small_vocabulary().identity
    assert base.identity.n_vocab == 260 and base.eot_id == 259
    other_pattern = small_vocabulary(GPT4_PATTERN)
    other_special = BpeTokenizer(ranks=base.ranks, special_tokens={"<|endoftext|>": 300})
    other_rank = BpeTokenizer(ranks=BYTES | {b"ab": 257, b"abc": 256, b" a": 258})
    digests = {t.identity.sha256 for t in (base, other_pattern, other_special, other_rank)}
    assert len(digests) == 4


def test_same_ranks_different_pattern_encode_differently_and_never_share_identity() -> None:
    ranks = BYTES | {b"12": 256, b"123": 257, b"1234": 258}
    gpt2, gpt4 = BpeTokenizer(ranks=ranks, pattern=GPT2_PATTERN), BpeTokenizer(ranks=ranks, pattern=GPT4_PATTERN)
    assert gpt2.encode("1234") != gpt4.encode("1234")  # GPT-4's pattern cuts digits in threes
    assert gpt2.identity != gpt4.identity
    with pytest.raises(ValueError, match="not the vocabulary"):
        require_vocabulary({"vocabulary": gpt2.identity.model_dump(by_alias=True)}, gpt4)


def test_end_of_text_in_corpus_text_is_plain_text() -> None:
    tokenizer = small_vocabulary()
    ids = tokenizer.encode("x<|endoftext|>y")
    assert tokenizer.eot_id not in ids
    assert tokenizer.decode(ids) == "x<|endoftext|>y"


def test_decode_takes_ids_as_a_list_an_array_or_numpy_scalars() -> None:
    tokenizer = small_vocabulary()
    ids = tokenizer.encode("abc ab a<|endoftext|>") + [tokenizer.eot_id]
    expected = b"abc ab a<|endoftext|><|endoftext|>"
    for given in (ids, tuple(ids), np.asarray(ids, dtype=np.uint16), [np.int64(i) for i in ids]):
        assert tokenizer.decode_bytes(given) == expected, type(given)


def test_decoding_an_id_that_is_no_token_names_it_and_n_vocab() -> None:
    # tiktoken's bare KeyError (or OverflowError below 0 and past 2**32) became tokpack's error.
    tokenizer = BpeTokenizer(ranks=BYTES | {b"ab": 256, b"abc": 258}, pattern=GPT2_PATTERN)  # 257: no token
    assert tokenizer.n_vocab == 260
    for ids, said in (([97, 999999], r"ids\[1\] is 999999, outside the vocabulary \(n_vocab 260\)$"),
                      (np.asarray([260]), r"ids\[0\] is 260, outside"), ([-1], r"ids\[0\] is -1, outside"),
                      ([2**40], r"is 1099511627776, outside"),
                      ([256, 257], r"ids\[1\] is 257, an unused id of the vocabulary \(n_vocab 260\)")):
        for decode in (tokenizer.decode, tokenizer.decode_bytes):
            with pytest.raises(InputError, match=said):
                decode(ids)
    assert tokenizer.decode([256, 258, 259]) == "ababc<|endoftext|>"


def test_refusals() -> None:
    with pytest.raises(ValueError, match="byte-level training needs none"):
        load_vocabulary("bytes")
    with pytest.raises(ValueError, match="single bytes"):
        BpeTokenizer(ranks={b"a": 0})
    with pytest.raises(ValueError, match="distinct"):
        BpeTokenizer(ranks=BYTES, special_tokens={"<|endoftext|>": 5})
    with pytest.raises(ValueError, match="no such vocabulary"):
        load_vocabulary("/nonexistent/ranks.tiktoken")


def test_saved_vocabulary_round_trips_and_detects_edits(tmp_path: Path) -> None:
    tokenizer = small_vocabulary(GPT4_PATTERN)
    saved = tokenizer.save(tmp_path / "v")
    loaded = load_vocabulary(saved)
    assert loaded.identity == tokenizer.identity and loaded.pattern == GPT4_PATTERN
    assert load_vocabulary(tmp_path / "v").identity == tokenizer.identity  # the directory works too
    with pytest.raises(ValueError, match="contradicts"):
        load_vocabulary(saved, pattern=GPT2_PATTERN)
    ranks = tmp_path / "v" / "ranks.tiktoken"
    ranks.write_bytes(ranks.read_bytes().replace(b" 256\n", b" 261\n"))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        load_vocabulary(saved)


def test_a_bare_rank_file_needs_its_pattern_named(tmp_path: Path) -> None:
    path = tmp_path / "ranks.tiktoken"
    path.write_bytes(rank_file_lines(small_vocabulary().ranks))
    with pytest.raises(ValueError, match="records no pre-tokenizer pattern.*pattern="):
        load_vocabulary(path)
    assert load_vocabulary(path, pattern=GPT2_PATTERN).identity == small_vocabulary().identity
    assert load_vocabulary(path, pattern=GPT4_PATTERN).identity == small_vocabulary(GPT4_PATTERN).identity


def rank_file_error(path: Path, text: bytes) -> str:
    """The message of loading a rank file of ``text`` (with a pattern: it would be refused without one)."""
    path.write_bytes(text)
    with pytest.raises(InputError) as caught:
        load_vocabulary(path, pattern=GPT2_PATTERN)
    return str(caught.value)


def test_a_bad_rank_line_names_the_file_and_line_in_one_style_with_a_fix(tmp_path: Path) -> None:
    path, good = tmp_path / "bad.tiktoken", rank_file_lines(BYTES)  # lines 1-256
    assert rank_file_error(path, good + b"YWI=\n") == (
        f"{path}: line 257: expected 'base64-token rank'; "
        "each line is a base64 token, one space and its rank (a tiktoken .tiktoken file)")
    assert rank_file_error(path, good + b"YWI= -5\n").startswith(f"{path}: line 257: rank -5 is outside [0, 2**32); ")
    assert rank_file_error(path, good + b"YQ== 256\n") == (
        f"{path}: line 257: repeated token (rank 97 and rank 256); each token may appear once")
    assert rank_file_error(path, good + b"YWI= 5\n") == (
        f"{path}: line 257: repeated rank 5 (first on line 6); each rank may appear once")


def test_a_gzip_compressed_rank_file_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "cl100k_base.tiktoken.gz"  # as bpe-openai ships it
    assert rank_file_error(path, gzip.compress(rank_file_lines(BYTES))) == (
        f"{path}: is gzip-compressed, not a rank file's text; decompress it first (e.g. gunzip) and give the decompressed file")


def test_a_rank_file_cut_inside_its_last_line_looks_truncated(tmp_path: Path) -> None:
    path, good = tmp_path / "cut.tiktoken", rank_file_lines(BYTES)
    truncated = f"{path}: line 257: the file looks truncated: its last line is malformed and no line end follows it; " \
                "get the whole file again"
    assert rank_file_error(path, good + b"YWI") == truncated
    # Cut inside the last line's rank, which then repeats an earlier rank (as a cut tiktoken file does).
    assert rank_file_error(path, good + b"YWI= 2") == truncated
    # A malformed last line that a newline ends is a bad line, not a cut.
    assert "expected 'base64-token rank'" in rank_file_error(path, good + b"YWI\n")


def test_a_rank_file_is_read_as_tiktoken_reads_it(tmp_path: Path) -> None:
    # tiktoken's load_tiktoken_bpe splits lines on any line end and its base64 ignores a BOM.
    good = rank_file_lines(BYTES)
    for name, text in (("bom", b"\xef\xbb\xbf" + good), ("cr", good.replace(b"\n", b"\r")),
                       ("crlf", good.replace(b"\n", b"\r\n")), ("no-end", good.rstrip(b"\n"))):
        path = tmp_path / f"{name}.tiktoken"
        path.write_bytes(text)
        assert load_vocabulary(path, pattern=GPT2_PATTERN).ranks == BYTES, name


def test_ranks_that_are_no_byte_level_vocabulary_name_their_file_and_a_fix(tmp_path: Path) -> None:
    path = tmp_path / "odd.tiktoken"
    without_b = {token: rank for token, rank in BYTES.items() if token != b"b"}
    assert rank_file_error(path, rank_file_lines(without_b)) == (
        f"{path}: ranks lack 1 of the 256 single bytes (first: 98); "
        "a byte-level vocabulary needs every single byte as a token: is this file complete?")
    path.write_bytes(rank_file_lines(BYTES | {b"zzz": 256}))  # no "zz" to make it from
    tokenizer = load_vocabulary(path, pattern=GPT2_PATTERN)
    with pytest.raises(InputError) as caught:
        tokenizer.to_tokenizer_json()  # the merges are derived when tokenizer.json is written
    assert str(caught.value) == (
        f"{path}: token b'zzz' (rank 256) cannot be built from lower ranks; every token of two or more bytes must be "
        "the join of two lower-ranked tokens, as in tiktoken's rank files: was a line deleted or a rank changed?")


def test_tokenizer_for_returns_only_the_matching_vocabulary(tmp_path: Path) -> None:
    tokenizer = small_vocabulary()
    schedule = {"vocabulary": tokenizer.identity.model_dump(by_alias=True), "batch": 4}
    checkpoint = {"data_schedule": schedule, "step": 10}
    assert tokenizer_for(checkpoint, tokenizer) is tokenizer
    with pytest.raises(ValueError, match="not the vocabulary"):
        tokenizer_for(checkpoint, small_vocabulary(GPT4_PATTERN))
    with pytest.raises(ValueError, match="no vocabulary identity"):
        require_vocabulary({"step": 3}, tokenizer)


def test_tokenizer_json_export_loads_in_hugging_face_with_same_ids(tmp_path: Path, shared_data: Path) -> None:
    from tokpack.vocab import train_hf_bytelevel

    texts = [p.read_text(encoding="utf-8") for p in sorted((shared_data / "polish" / "narrative").glob("*.txt"))]
    tokenizer = train_hf_bytelevel(texts, vocab_size=1500, pattern=GPT4_PATTERN)
    path = tmp_path / "tokenizer.json"
    path.write_text(tokenizer.to_tokenizer_json(), encoding="utf-8")
    assert load_vocabulary(path).identity == tokenizer.identity
    hugging_face = Tokenizer.from_file(str(path))
    sample = real_text(shared_data)[:100_000] + " zażółć gęślą jaźń 👩‍👩‍👧 12345\r\n\t x"
    assert hugging_face.encode(sample).ids == tokenizer.encode(sample)
    assert hugging_face.decode(tokenizer.encode(sample)) == sample


def test_gpt2_ids_equal_tiktoken_through_rank_file_and_encoder_pair(
    tmp_path: Path, gpt2_rank_file: Path, shared_data: Path
) -> None:
    reference = tiktoken.Encoding(
        name="gpt2-from-whisper", pat_str=r50k_pat_str, mergeable_ranks=read_ranks(gpt2_rank_file),
        special_tokens={"<|endoftext|>": 50256},
    )
    text = real_text(shared_data) + "  trailing spaces   \n\n<|endoftext|> 🙂"
    from_ranks = load_vocabulary(gpt2_rank_file)
    assert from_ranks.n_vocab == 50257
    assert from_ranks.encode(text) == reference.encode_ordinary(text)

    # The same vocabulary as GPT-2's own file pair, converted here from the ranks.
    alphabet = byte_to_unicode()
    encoder = {"".join(alphabet[b] for b in token): rank for token, rank in from_ranks.ranks.items()}
    encoder["<|endoftext|>"] = 50256
    (tmp_path / "encoder.json").write_text(json.dumps(encoder), encoding="utf-8")
    merges = ["#version: 0.2"] + [f"{left} {right}" for left, right in derive_merges(from_ranks.ranks)]
    (tmp_path / "vocab.bpe").write_text("\n".join(merges) + "\n", encoding="utf-8")
    from_pair = load_vocabulary((tmp_path / "encoder.json", tmp_path / "vocab.bpe"))
    assert from_pair.identity == from_ranks.identity
    assert from_pair.encode(text) == reference.encode_ordinary(text)

    # Hugging Face reading that pair agrees too: the conversion is the real format.
    hugging_face = Tokenizer(BPE.from_file(str(tmp_path / "encoder.json"), str(tmp_path / "vocab.bpe")))
    hugging_face.pre_tokenizer = ByteLevel(add_prefix_space=False)
    english = text[:50_000]
    assert hugging_face.encode(english).ids == reference.encode_ordinary(english)


def test_gpt2_pair_with_inconsistent_merges_is_refused(tmp_path: Path) -> None:
    alphabet = byte_to_unicode()
    encoder = {alphabet[b]: b for b in range(256)} | {"ab": 256, "bc": 257}
    (tmp_path / "encoder.json").write_text(json.dumps(encoder), encoding="utf-8")
    (tmp_path / "vocab.bpe").write_text("#version: 0.2\nb c\na b\n", encoding="utf-8")
    with pytest.raises(ValueError, match="merge 1"):
        load_vocabulary((tmp_path / "encoder.json", tmp_path / "vocab.bpe"))


def gpt2_pair(folder: Path, extra: dict[str, int], merges: list[str]) -> tuple[Path, Path]:
    """GPT-2's two files for the 256 bytes, ``extra`` tokens and ``merges``."""
    alphabet = byte_to_unicode()
    (folder / "encoder.json").write_text(json.dumps({alphabet[b]: b for b in range(256)} | extra), encoding="utf-8")
    (folder / "vocab.bpe").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    return folder / "encoder.json", folder / "vocab.bpe"


def hugging_face_pair(pair: tuple[Path, Path], text: str) -> list[int]:
    tokenizer = Tokenizer(BPE.from_file(str(pair[0]), str(pair[1])))
    tokenizer.pre_tokenizer = ByteLevel(add_prefix_space=False)
    ids: list[int] = tokenizer.encode(text).ids
    return ids


def test_gpt2_pair_whose_merges_the_rank_rule_would_not_make_is_refused(tmp_path: Path) -> None:
    """``[a b, b c, a bc]`` make ids 256, 257, 258 in order, yet Hugging Face gives ``abc`` as
    ``[ab, c]`` (no merge joins them) where tiktoken's rank rule gives ``[abc]``."""
    pair = gpt2_pair(tmp_path, {"ab": 256, "bc": 257, "abc": 258}, ["a b", "b c", "a bc"])
    assert hugging_face_pair(pair, "abc") == [256, 99]
    with pytest.raises(InputError, match=r"vocab.bpe: merge 3 \('a bc'\) makes 'abc', which tiktoken's rank rule "
                                         r"makes from 'ab' \+ 'c'"):
        load_vocabulary(pair)


def test_gpt2_pair_token_no_merge_makes_is_never_made_from_text(tmp_path: Path) -> None:
    """``abc`` is in encoder.json but no merge makes it: Hugging Face never makes it from text, so
    neither does tokpack (it is a special token, as in a ``tokenizer.json``)."""
    pair = gpt2_pair(tmp_path, {"ab": 256, "abc": 257}, ["a b"])
    vocabulary = load_vocabulary(pair)
    for text in ("abc", "abcd abc", " abc"):
        assert vocabulary.encode(text) == hugging_face_pair(pair, text), text
    assert vocabulary.special_tokens == {"abc": 257, "<|endoftext|>": 258}


def test_gpt4_pattern_cuts_digits_in_threes_in_tiktoken_and_hugging_face(tmp_path: Path) -> None:
    tokenizer = BpeTokenizer(ranks=BYTES | {b"12": 256, b"123": 257}, pattern=GPT4_PATTERN)
    assert tokenizer.encode("1234567") == [257, ord("4"), ord("5"), ord("6"), ord("7")]  # 123|456|7
    path = tmp_path / "tokenizer.json"
    path.write_text(tokenizer.to_tokenizer_json(), encoding="utf-8")
    text = "rok 1234567 i 98765432101, 12 123"
    assert Tokenizer.from_file(str(path)).encode(text).ids == tokenizer.encode(text)
    import regex

    assert regex.findall(GPT4_PATTERN, "1234567") == ["123", "456", "7"]
