"""The BPE explorer: the reference's four-document example, stepped and questioned in a real browser."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.bpe import train_bpe
from tokpack.cli import app

from browser import browser_page, embedded_data, screenshot

DOCUMENTS = ["abab", "abab", "baba", "aaaa"]


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("explorer") / "explore.html"
    result = CliRunner().invoke(app, ["bpe", "explore", *DOCUMENTS, "--merges", "5", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    return out


def chips(page, testid: str) -> list[list[int]]:  # type: ignore[no-untyped-def]
    rows = page.get_by_test_id(testid).locator(".doc")
    return [[int(x) for x in rows.nth(i).locator(".chip").evaluate_all("els => els.map(e => e.dataset.id)")]
            for i in range(rows.count())]


def test_next_merge_three_times_follows_the_exact_trace(explorer: Path) -> None:
    merges, trace = train_bpe(DOCUMENTS, 5)  # the reference core, as the learner would check by hand
    with browser_page(width=1000) as page:
        page.goto(explorer.as_uri())
        data = embedded_data(page)
        assert [s["winner"] for s in data["steps"]] == [list(m) for m in merges]
        assert [s["frequency"] for s in data["steps"]] == [row.frequency for row in trace]
        assert chips(page, "before") == [list(d.encode()) for d in DOCUMENTS]
        for step in range(3):
            winner = page.locator("#counts tr.winner td").all_inner_texts()
            assert winner[:2] == [f"({trace[step].left_id}, {trace[step].right_id})", str(trace[step].frequency)]
            assert chips(page, "after") == data["steps"][step]["after"]
            page.get_by_role("button", name="next merge →").click()
        assert page.locator("#position").inner_text() == "Step 4 of 5"
        # the sequences now hold the three new ids side by side with old ones
        assert chips(page, "before") == data["steps"][3]["before"] == [[258], [258], [98, 256, 97], [257, 257]]
        screenshot(page, "explorer-step-4")


def test_aaaa_counts_three_but_replaces_two(explorer: Path) -> None:
    with browser_page() as page:
        page.goto(explorer.as_uri())
        page.keyboard.press("ArrowRight")  # keyboard works as well as the button
        assert page.locator("#position").inner_text() == "Step 2 of 5"
        assert page.locator("#counts tr.winner td").all_inner_texts()[:2] == ["(97, 97)", "3"]
        last_doc = page.get_by_test_id("before").locator(".doc").nth(3)
        assert last_doc.locator(".chip.replaced").count() == 4  # two replacements, two chips each
        assert page.get_by_test_id("after").locator(".doc").nth(3).locator(".chip.new").count() == 2
        assert "replaces 2 occurrences" in page.locator("#rule").inner_text()
        page.get_by_role("button", name="← previous").click()
        assert page.locator("#position").inner_text() == "Step 1 of 5"


def test_a_wrong_pair_is_explained_before_the_merge(explorer: Path) -> None:
    with browser_page() as page:
        page.goto(explorer.as_uri())
        field = page.locator("#pair")
        for typed, expected in (
            ("98,97", "No: (98, 97) occurs 4 times, fewer than (97, 98) with 5."),
            ("97,99", "No: (97, 99) does not occur in any document now, so its count is 0."),
            ("97, 98", "Yes: (97, 98) is the pair the rules pick (count 5)."),
            ("ab", "Type a pair as two ids, like 97,98."),
        ):
            field.fill(typed)
            field.press("Enter")
            assert page.locator("#verdict").inner_text() == expected
        assert page.locator("#position").inner_text() == "Step 1 of 5"  # asking never applies the merge
        screenshot(page, "explorer-question")


def test_a_tie_is_explained_by_the_smaller_pair(tmp_path: Path) -> None:
    out = tmp_path / "tie.html"
    assert CliRunner().invoke(app, ["bpe", "explore", "abba", "--merges", "3", "-o", str(out)]).exit_code == 0
    with browser_page() as page:
        page.goto(out.as_uri())
        # (97, 98), (98, 98), (98, 97) all occur once: the smallest pair wins
        assert "a tie of 3 pairs: the numerically smallest pair wins" in page.locator("#rule").inner_text()
        page.locator("#pair").fill("98,97")
        page.locator("#pair").press("Enter")
        assert "ties with (97, 98) at 1" in page.locator("#verdict").inner_text()


def test_the_explorer_fits_a_phone(explorer: Path) -> None:
    with browser_page(width=375, height=740) as page:
        page.goto(explorer.as_uri())
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375
        page.get_by_role("button", name="next merge →").click()
        screenshot(page, "explorer-phone")


def test_a_document_holding_comment_and_script_markup_does_not_break_the_page(tmp_path: Path) -> None:
    # Issue 12, item 7: "<!--<script>" in a document killed the page's script.
    out = tmp_path / "markup.html"
    documents = ["<!--<script>", "</script><b>x</b>", "a&amp;b"]
    assert CliRunner().invoke(app, ["bpe", "explore", *documents, "--merges", "2", "-o", str(out)]).exit_code == 0
    with browser_page() as page:
        page.goto(out.as_uri())
        assert embedded_data(page)["texts"] == documents
        assert page.locator("#position").inner_text() == "Step 1 of 2"
