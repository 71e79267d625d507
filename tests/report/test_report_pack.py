"""The report of a pack, opened from disk in a real browser."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tokpack import prepare, sample_corpus
from tokpack.cli import app
from tokpack.store import Pack

from browser import browser_page, embedded_data, screenshot
from conftest import DATA


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    return prepare(sample_corpus(), cache_dir=cache, vocab_size=600, document_bytes=1024).tokens_dir


def write_report(pack: Path, out: Path, block: int = 256) -> Path:
    result = CliRunner().invoke(app, ["report", str(pack), "-o", str(out), "--block", str(block)])
    assert result.exit_code == 0, result.stderr
    return out


def test_pack_report_shows_what_its_data_says(pack: Path, tmp_path: Path) -> None:
    page_path = write_report(pack, tmp_path / "pack.html")
    opened = Pack(pack)
    lengths = np.diff(np.append(opened.starts, opened.n_tokens))
    with browser_page() as page:
        page.goto(page_path.as_uri())
        facts = embedded_data(page)["pack"]
        # the data is the pack's, computed independently here
        assert facts["n_docs"] == opened.n_docs and facts["n_tokens"] == opened.n_tokens
        assert facts["lengths"]["p50"] == pytest.approx(float(np.percentile(lengths, 50)))
        assert facts["share_within_block"] == pytest.approx(float(np.mean(lengths <= 256)))
        assert facts["verified"] is True
        # and the page shows that data
        assert page.get_by_test_id("n_docs").inner_text() == f"{opened.n_docs:,}"
        assert page.get_by_test_id("n_tokens").inner_text() == f"{opened.n_tokens:,}"
        assert page.get_by_test_id("vocabulary-sha256").inner_text() == opened.vocabulary.sha256
        assert page.get_by_test_id("p95").inner_text() == f"{facts['lengths']['p95']:,.0f}"
        assert page.get_by_test_id("verified").inner_text() == "verified"
        assert page.get_by_test_id("padding-packed").inner_text() == f"{facts['padding_packed']:.2%}"
        assert facts["padding_packed"] < facts["padding_one_per_row"]
        histogram = page.get_by_test_id("length-histogram").locator("svg")
        assert histogram.count() == 1 and histogram.bounding_box()["width"] > 300
        screenshot(page, "report-pack")


def test_a_corrupted_pack_is_reported_not_verified(pack: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(pack, copy)
    tokens = copy / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-1] ^= 1
    tokens.write_bytes(bytes(data))
    page_path = write_report(copy, tmp_path / "bad.html")
    with browser_page() as page:
        page.goto(page_path.as_uri())
        assert "NOT verified" in page.get_by_test_id("verified").inner_text()
        assert embedded_data(page)["pack"]["verified"] is False


def test_report_of_nothing_is_one_line_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", str(tmp_path / "none.txt"), "-o", str(tmp_path / "x.html")])
    assert result.exit_code == 2 and not (tmp_path / "x.html").exists()


def test_pack_report_titles_the_corpus_shows_source_and_compression_and_a_log_axis_when_lengths_span_decades(tmp_path: Path) -> None:
    import re

    from tokpack.report.pack import pack_report

    # Real text in documents of very different lengths (a folder: one document per file): short
    # lines and whole stories, decades apart.
    stories = sorted((DATA / "polish" / "narrative").glob("*.txt"))
    corpus = tmp_path / "opowiesci"
    corpus.mkdir()
    lines = [line for line in stories[0].read_text(encoding="utf-8").splitlines(keepends=True) if 20 < len(line) < 80]
    for index, line in enumerate(lines[:30]):
        (corpus / f"a{index:03d}.txt").write_text(line, encoding="utf-8")
    for index, story in enumerate(stories[1:5]):
        (corpus / f"b{index:03d}.txt").write_bytes(story.read_bytes()[:60_000])
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(corpus.iterdir()))
    prepared = prepare(corpus, cache_dir=tmp_path / "c", vocab_size=400)
    html = pack_report(prepared.tokens_dir, block=256)
    assert re.search(r"<h1>opowiesci: tokpack report</h1>", html)
    facts = __import__("json").loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', html, re.S).group(1))["pack"]
    assert facts["source"]["name"] == "opowiesci" and facts["source"]["n_bytes"] == len(text.encode("utf-8"))
    assert abs(facts["characters_per_token"] - len(text) / prepared.meta.n_tokens) < 1e-9
    assert 'data-testid="source-name">opowiesci<' in html and 'data-testid="characters-per-token"' in html
    lengths = prepared.pack().starts
    assert facts["length_axis"] == "log" and 'data-x-scale="log"' in html and len(lengths) > 10
    assert 'data-legend="outside"' in html
