"""A tokenizer report holds a grade to targets only when there are some (the user's, or the Polish
recipe's for the tokenizer that recipe made), says whose they are, and names its target lines in
the legend beside the chart, never over the bars."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack import prepare
from tokpack.cli import app

from tokenizer_fixtures import ARTIFACT, small_corpus

runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_corpus(tmp_path_factory.mktemp("graded") / "data")


@pytest.fixture(scope="module")
def other_tokenizer(tmp_path_factory: pytest.TempPathFactory, data: Path) -> Path:
    """A tokenizer the Polish recipe did not make (its vocabulary.json)."""
    return prepare(data / "narrative", cache_dir=tmp_path_factory.mktemp("cache"), vocab_size=600).vocabulary_path


def _report(tokenizer: Path, data: Path, out: Path, *extra: str) -> tuple[dict, str, str]:
    result = runner.invoke(app, ["report", str(tokenizer), "--data", str(data), "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    facts = json.loads(re.search(r'id="report-data">(.*?)</script>', html, re.S).group(1))["tokenizer"]["grade"]
    chart = re.search(r'data-testid="domain-chart".*?</figure>', html, re.S).group(0)
    text = " ".join(unescape(re.sub(r"<[^>]+>", "", html.split("<h2>Longest")[0].split("<figure")[0])).split())
    return facts, chart, text


def test_no_targets_no_verdict(other_tokenizer: Path, data: Path, tmp_path: Path) -> None:
    facts, chart, text = _report(other_tokenizer, data, tmp_path / "plain.html")
    assert facts["min_global"] is None and facts["min_domain"] is None and facts["passed"] is None
    assert all(domain["passed"] is None for domain in facts["domains"])
    for said in ("target", "threshold", "passes", "fails", "3.30", "2.50", "min global"):
        assert said not in text and said not in chart


def test_the_user_s_targets_are_said_as_theirs_and_named_in_the_legend(other_tokenizer: Path, data: Path,
                                                                        tmp_path: Path) -> None:
    facts, chart, text = _report(other_tokenizer, data, tmp_path / "mine.html", "--min-global", "1.5", "--min-domain", "9")
    assert (facts["min_global"], facts["min_domain"], facts["whose"]) == (1.5, 9.0, "your targets")
    assert facts["passed"] is False and not any(domain["passed"] for domain in facts["domains"])
    assert "against your targets, 1.50 overall and 9.00 per domain: fails" in text
    # Each line's name is written once, in the legend (outside the axes), not over the bars.
    for label in ("target overall (1.5)", "target per domain (9)"):
        assert chart.count(label) == 1
    assert 'data-legend="outside"' in chart
    only_global, _, said = _report(other_tokenizer, data, tmp_path / "global.html", "--min-global", "1.5")
    assert only_global["passed"] is True and "against your targets, 1.50 overall: passes" in said


def test_the_polish_recipe_s_tokenizer_is_held_to_that_recipe_s_targets(data: Path, tmp_path: Path) -> None:
    facts, chart, text = _report(ARTIFACT / "tokenizer.json", data, tmp_path / "polish.html")
    assert (facts["min_global"], facts["min_domain"]) == (3.30, 2.50)
    assert "against the Polish recipe's targets (docs/polish-tokenizer.md), 3.30 overall and 2.50 per domain" in text
    assert chart.count("target overall (3.3)") == 1
