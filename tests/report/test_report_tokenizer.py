"""The report of the shipped Polish tokenizer, graded on its validation split, in a real browser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack import load_vocabulary
from tokpack.cli import app
from tokpack.grading.split import VALIDATION, plan_split, write_split
from tokpack.report.tokenizer import readable

from browser import browser_page, embedded_data, screenshot
from tokenizer_fixtures import ARTIFACT, POLISH, require_data

runner = CliRunner()


@pytest.fixture(scope="module")
def validation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_data()
    recorded = json.loads((ARTIFACT / "manifest.json").read_text(encoding="utf-8"))["split"]
    out = tmp_path_factory.mktemp("split") / "split"
    write_split(plan_split(POLISH, validation=recorded["validation_fraction"], seed=recorded["seed"]), out)
    return out / VALIDATION


def test_readable_tokens_escape_what_is_not_utf8() -> None:
    assert readable(b"\xff\xfe") == "\\xff\\xfe"
    assert readable("żółw\t".encode()) == "żółw→"
    assert readable("😀".encode()[:3] + b"x") == "\\xf0\\x9f\\x98x"


def test_tokenizer_report_shows_its_grade_against_a_baseline(validation: Path, tmp_path: Path, gpt2_rank_file: Path) -> None:
    baseline = tmp_path / "gpt2.json"
    graded = runner.invoke(app, ["tokenizer", "grade", str(gpt2_rank_file), str(validation), "--json"])
    assert graded.exit_code == 1  # GPT-2 fails the Polish thresholds; its JSON is still the baseline
    baseline.write_text(graded.stdout, encoding="utf-8")
    out = tmp_path / "tokenizer.html"
    result = runner.invoke(app, ["report", str(ARTIFACT / "tokenizer.json"), "--data", str(validation),
                                 "--baseline", str(baseline), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    vocabulary = load_vocabulary(ARTIFACT / "tokenizer.json")
    spelled = {rank: token for token, rank in vocabulary.ranks.items()}
    with browser_page() as page:
        page.goto(out.as_uri())
        facts = embedded_data(page)["tokenizer"]
        grade = facts["grade"]
        # the data: global figure from sums, never a mean of ratios; the weakest is the minimum
        assert grade["chars_per_token"] == pytest.approx(
            sum(d["characters"] for d in grade["domains"]) / sum(d["tokens"] for d in grade["domains"]))
        weakest = min(grade["domains"], key=lambda d: d["chars_per_token"])
        assert grade["weakest_domain"] == weakest["domain"]
        # what the page shows is that data
        assert page.get_by_test_id("global-cpt").inner_text() == f"{grade['chars_per_token']:.3f}"
        assert page.get_by_test_id("weakest-domain").inner_text() == weakest["domain"]
        shown = page.get_by_test_id("domain-cpt").all_inner_texts()
        assert shown == [f"{d['chars_per_token']:.3f}" for d in grade["domains"]]
        assert page.get_by_test_id("n_vocab").inner_text() == "8,192"
        chart = page.get_by_test_id("domain-chart").locator("svg")
        assert chart.count() == 1 and "gpt2.tiktoken" in chart.inner_html()  # the baseline is drawn
        longest = page.get_by_test_id("longest-token").all_inner_texts()
        assert longest == [readable(spelled[t["id"]]) for t in facts["longest"]]
        assert len(spelled[facts["longest"][0]["id"]]) == max(len(t) for t in vocabulary.ranks)
        screenshot(page, "report-tokenizer")
