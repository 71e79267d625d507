"""`check` catches any text that does not come back and names the first differing character;
`grade` computes characters per token from sums, per domain, with exit codes 0/1/2."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.grading.grade import TokenCounter, grade
from tokpack.grading.torture import TORTURE_SET, describe_difference, structure_report

from tokenizer_fixtures import OTHER, corpus, require_data, train_small  # noqa: F401 (corpus is a fixture)

runner = CliRunner()


@pytest.fixture(scope="module")
def small_tokenizer(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_small(corpus, tmp_path_factory.mktemp("tok"), vocab_size=500)


def test_torture_set_covers_what_breaks_tokenizers() -> None:
    text = "".join(case.text for case in TORTURE_SET)
    for needed in ("ż", "ł", "\u200d", "🏽", "🇵🇱", "\t", "   ", "\r\n", "\x00", "\x07", "<|endoftext|>"):
        assert needed in text, needed
    assert TORTURE_SET[2].text != unicodedata.normalize("NFC", TORTURE_SET[2].text)  # decomposed Polish
    assert any(case.text.endswith("\n") for case in TORTURE_SET)
    assert any(unicodedata.category(case.text[0]) == "Mn" for case in TORTURE_SET if case.text)  # lone mark
    assert max(len(case.text) for case in TORTURE_SET) >= 20_000
    scripts = {"Cyrillic": "ж", "Greek": "ψ", "Hebrew": "ש", "Arabic": "ع", "Hiragana": "い", "Han": "漢", "Hangul": "한"}
    for script, char in scripts.items():
        assert char in text, script
    if OTHER.is_dir():  # every script folder of other/ has a phrase in the set
        names = {case.name for case in TORTURE_SET}
        codes = {"ar": "arabic", "bg": "bulgarian", "el": "greek", "he": "hebrew", "ja": "japanese", "ko": "korean",
                 "ru": "russian", "uk": "ukrainian", "zh_CN": "chinese-simplified", "zh_TW": "chinese-traditional"}
        for path in (OTHER / "scripts").iterdir():
            code = path.stem.removeprefix("wesnoth-")
            assert f"script: {codes[code]}" in names, path.name


def test_check_passes_a_lossless_tokenizer(small_tokenizer: Path, corpus: Path) -> None:
    result = runner.invoke(app, ["tokenizer", "check", str(small_tokenizer), str(corpus)])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "tokenizers, tiktoken" in result.output
    assert "500 ids (500 in the model + 0 added), 256 of 256 bytes, no normalizer" in result.output  # <|endoftext|> too


def test_check_names_the_first_differing_character_of_a_lossy_tokenizer(small_tokenizer: Path, tmp_path: Path) -> None:
    document = json.loads(small_tokenizer.read_text(encoding="utf-8"))
    document["normalizer"] = {"type": "Lowercase"}
    lossy = tmp_path / "lossy.json"
    lossy.write_text(json.dumps(document), encoding="utf-8")
    sample = tmp_path / "sample.txt"
    sample.write_text("zażółć Gęślą", encoding="utf-8")
    result = runner.invoke(app, ["tokenizer", "check", str(lossy), str(sample), "--no-torture"])
    assert result.exit_code == 1
    assert "has a normalizer (Lowercase)" in result.output
    assert "character 7: expected 'G' U+0047 LATIN CAPITAL LETTER G, got 'g' U+0067 LATIN SMALL LETTER G" in result.output
    assert str(sample) in result.output


def test_structure_report_flags_missing_bytes(small_tokenizer: Path, tmp_path: Path) -> None:
    document = json.loads(small_tokenizer.read_text(encoding="utf-8"))
    del document["model"]["vocab"]["Ā"]  # byte 0's stand-in
    document["model"]["merges"] = [m for m in document["model"]["merges"] if "Ā" not in "".join(m)]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(document), encoding="utf-8")
    assert "1 of the 256 bytes have no id (first: 0)" in structure_report(broken).problems


def test_describe_difference_handles_prefixes() -> None:
    assert describe_difference("abc\n", "abc") == "character 3: expected '\\n' U+000A <Cc>, got end of text"
    assert describe_difference("same", "same") is None


def test_check_bad_input_exits_2(tmp_path: Path, small_tokenizer: Path) -> None:
    not_json = tmp_path / "t.json"
    not_json.write_text("{", encoding="utf-8")
    result = runner.invoke(app, ["tokenizer", "check", str(not_json)])
    assert result.exit_code == 2 and "not a loadable tokenizer.json" in result.output
    latin2 = tmp_path / "latin2.txt"
    latin2.write_bytes("żółw".encode("iso-8859-2"))
    result = runner.invoke(app, ["tokenizer", "check", str(small_tokenizer), str(latin2)])
    assert result.exit_code == 2 and "latin2.txt: not UTF-8 (invalid byte at offset 0)" in result.output


def _two_domains(root: Path) -> Path:
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "a" / "long.txt").write_text("x" * 900, encoding="utf-8")
    (root / "a" / "short.txt").write_text("y" * 10, encoding="utf-8")
    (root / "b" / "one.txt").write_text("z" * 100, encoding="utf-8")
    return root


def test_grade_is_sums_not_means(tmp_path: Path) -> None:
    # One token per 3 characters of long texts, but 10 tokens for any short one.
    counter = TokenCounter("fake", 42, lambda texts: [len(t) // 3 if len(t) > 50 else 10 for t in texts])
    report = grade(counter, _two_domains(tmp_path), min_global=3.0, min_domain=2.0)
    domains = {d.domain: d for d in report.domains}
    assert (domains["a"].characters, domains["a"].tokens) == (910, 310)
    assert domains["a"].chars_per_token == pytest.approx(910 / 310)  # not mean(3.0, 1.0) = 2.0
    assert report.chars_per_token == pytest.approx(1010 / 343)
    assert report.weakest_domain == "a" and report.vocab_size == 42
    assert not report.passed  # global 2.94 < 3.0


def test_grade_cli_exit_codes_and_json(small_tokenizer: Path, corpus: Path, tmp_path: Path) -> None:
    ok = runner.invoke(app, ["tokenizer", "grade", str(small_tokenizer), str(corpus), "--min-global", "1", "--min-domain", "1"])
    assert ok.exit_code == 0, ok.output
    assert "global" in ok.output and "weakest" in ok.output and "PASS" in ok.output
    failing = runner.invoke(app, ["tokenizer", "grade", str(small_tokenizer), str(corpus), "--min-domain", "50", "--json"])
    assert failing.exit_code == 1
    report = json.loads(failing.output)
    assert report["schema"] == "tokpack.grade.v1" and report["passed"] is False
    assert {d["domain"] for d in report["domains"]} == {"code", "narrative"}
    assert report["chars_per_token"] == pytest.approx(report["characters"] / report["tokens"])
    missing = runner.invoke(app, ["tokenizer", "grade", str(tmp_path / "none.json"), str(corpus)])
    assert missing.exit_code == 2 and "no such file" in missing.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["tokenizer", "grade", str(small_tokenizer), str(empty)])
    assert result.exit_code == 2 and "no usable text file" in result.output


def test_grade_accepts_a_rank_file(small_tokenizer: Path, corpus: Path) -> None:
    require_data()
    by_json = runner.invoke(app, ["tokenizer", "grade", str(small_tokenizer), str(corpus), "--json", "--min-global", "0"])
    by_vocabulary = runner.invoke(app, ["tokenizer", "grade", str(small_tokenizer.parent / "vocabulary.json"),
                                        str(corpus), "--json", "--min-global", "0"])
    assert json.loads(by_json.output)["tokens"] == json.loads(by_vocabulary.output)["tokens"]
