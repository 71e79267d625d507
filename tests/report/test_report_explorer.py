"""The BPE lab in a real browser: the rules run in the page and agree with the reference core,
the learner steps, predicts and is told why, and proofs made or checked in the page agree with
``tokpack bpe verify``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.bpe import train_bpe
from tokpack.bpe.challenge import new_challenge
from tokpack.cli import app

from browser import browser_page, screenshot
from conftest import DATA

DOCUMENTS = ["abab", "abab", "baba", "aaaa"]
runner = CliRunner()


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("explorer") / "explore.html"
    result = runner.invoke(app, ["bpe", "explore", *DOCUMENTS, "--merges", "5", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def chips(page, testid: str) -> list[list[int]]:  # type: ignore[no-untyped-def]
    rows = page.get_by_test_id(testid).locator(".doc")
    return [[int(x) for x in rows.nth(i).locator(".chip").evaluate_all("els => els.map(e => e.dataset.id)")]
            for i in range(rows.count())]


def random_corpora(count: int, seed: int = 0) -> list[tuple[list[str], int]]:
    """Corpora that stress the rules: small alphabets (ties), Polish letters (two-byte UTF-8),
    emoji (four bytes, and a modifier), runs (overlapping pairs), empty and one-byte documents."""
    alphabets = ["ab", "abc", "a", "aż", "zżź ", "ab 🙂", "🙂👍🏽", "0123 ", "aaaaab", "ąę"]
    rng = random.Random(seed)
    corpora = []
    for _ in range(count):
        docs = []
        for _ in range(rng.randint(0, 10)):
            kind = rng.random()
            if kind < 0.15:
                docs.append("")
            elif kind < 0.3:
                docs.append(rng.choice("aż🙂 ") * rng.randint(1, 30))
            else:
                letters = rng.choice(alphabets)
                docs.append("".join(rng.choice(letters) for _ in range(rng.randint(1, 40))))
        corpora.append((docs, rng.randint(0, 40)))
    return corpora


def test_the_page_rules_equal_the_reference_on_random_corpora(explorer: Path) -> None:
    corpora = random_corpora(60)
    with browser_page() as page:
        page.goto(explorer.as_uri())
        traces = page.evaluate("cases => cases.map(([texts, n]) => bpe.train(texts, n))", corpora)
        for (texts, merges), trace in zip(corpora, traces):
            assert trace == [row.model_dump() for row in train_bpe(texts, merges)[1]], texts
        # and through the page's own controls: edit the corpus, train, step to the end
        for texts, merges in corpora[:2]:
            page.locator("details summary").click() if not page.locator("#corpus").is_visible() else None
            page.locator("#corpus").fill("\n".join(texts))
            page.locator("#merges").fill(str(merges))
            page.get_by_role("button", name="train on this corpus").click()
            expected = train_bpe("\n".join(texts).split("\n"), merges)[1]
            shown = []
            while page.locator("#counts tr.winner").count() and not page.locator("#next").is_disabled():
                shown.append(page.locator("#counts tr.winner td").all_inner_texts()[:2])
                page.get_by_role("button", name="next merge →").click()
            assert shown == [[f"({r.left_id}, {r.right_id})", str(r.frequency)] for r in expected]


def test_next_merge_three_times_follows_the_exact_trace(explorer: Path) -> None:
    merges, trace = train_bpe(DOCUMENTS, 5)
    with browser_page(width=1000) as page:
        page.goto(explorer.as_uri())
        assert chips(page, "before") == [list(d.encode()) for d in DOCUMENTS]
        docs = [list(d.encode()) for d in DOCUMENTS]
        from tokpack.bpe import merge_pair

        for step in range(3):
            winner = page.locator("#counts tr.winner td").all_inner_texts()
            assert winner[:2] == [f"({trace[step].left_id}, {trace[step].right_id})", str(trace[step].frequency)]
            docs = merge_pair(docs, merges[step], 256 + step)
            assert chips(page, "after") == docs
            page.get_by_role("button", name="next merge →").click()
        assert page.locator("#position").inner_text() == "Step 4 of 5"
        assert chips(page, "before") == [[258], [258], [98, 256, 97], [257, 257]]
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


def test_predict_mode_hides_the_counts_until_the_learner_names_a_pair(explorer: Path) -> None:
    with browser_page() as page:
        page.goto(explorer.as_uri())
        page.get_by_label("predict first (hide the counts)").check()
        assert not page.locator("#counts").is_visible() and not page.get_by_test_id("after").is_visible()
        assert page.get_by_test_id("before").locator(".chip.replaced").count() == 0  # no hint either
        page.locator("#pair").fill("98,97")
        page.locator("#pair").press("Enter")
        assert page.locator("#verdict").inner_text() == "No: (98, 97) occurs 4 times, fewer than (97, 98) with 5."
        assert page.locator("#counts").is_visible()  # the answer reveals the counts
        page.get_by_role("button", name="next merge →").click()
        assert not page.locator("#counts").is_visible()  # hidden again on the next step
        page.keyboard.press("ArrowRight")  # step 3: (256, 256) count 2 ...
        page.locator("#pair").fill("97,97")
        page.locator("#pair").press("Enter")
        assert "does not occur" in page.locator("#verdict").inner_text()
        screenshot(page, "explorer-predict")


def test_a_tie_is_explained_by_the_smaller_pair(tmp_path: Path) -> None:
    out = tmp_path / "tie.html"
    assert runner.invoke(app, ["bpe", "explore", "abba", "--merges", "3", "-o", str(out)]).exit_code == 0
    with browser_page() as page:
        page.goto(out.as_uri())
        assert "a tie of 3 pairs: the numerically smallest pair wins" in page.locator("#rule").inner_text()
        page.get_by_label("predict first (hide the counts)").check()
        page.locator("#pair").fill("98,97")
        page.locator("#pair").press("Enter")
        assert "ties with (97, 98) at 1, and on a tie the numerically smaller pair wins" in page.locator("#verdict").inner_text()


def test_the_explorer_fits_a_phone(explorer: Path) -> None:
    with browser_page(width=375, height=740) as page:
        page.goto(explorer.as_uri())
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        page.get_by_role("button", name="next merge →").click()
        screenshot(page, "explorer-phone")


def test_a_document_holding_comment_and_script_markup_does_not_break_the_page(tmp_path: Path) -> None:
    # "<!--<script>" in a document must not end the page's own script.
    out = tmp_path / "markup.html"
    documents = ["<!--<script>", "</script><b>x</b>", "a&amp;b"]
    assert runner.invoke(app, ["bpe", "explore", *documents, "--merges", "2", "-o", str(out)]).exit_code == 0
    with browser_page() as page:
        page.goto(out.as_uri())
        assert page.locator("#corpus").input_value() == "\n".join(documents)
        assert page.locator("#position").inner_text() == "Step 1 of 2"


@pytest.fixture()
def challenge_file(tmp_path: Path) -> Path:
    path = DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt"
    if not path.is_file():
        pytest.skip(f"real data not found at {path}")
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    corpus = lines[:40] + ["", "a", "🙂🙂", "line one\nline two", lines[0]]
    challenge = new_challenge(corpus, 150, challenge_id="lab-test", expires_at="2999-01-01")
    out = tmp_path / "challenge.json"
    out.write_text(json.dumps(challenge.model_dump(mode="json"), ensure_ascii=False), encoding="utf-8")
    return out


def test_a_proof_written_in_the_page_verifies_with_the_cli(tmp_path: Path, challenge_file: Path) -> None:
    out = tmp_path / "lab.html"
    assert runner.invoke(app, ["bpe", "explore", "x", "-o", str(out)]).exit_code == 0
    with browser_page() as page:
        page.goto(out.as_uri())
        page.locator("#load-challenge").set_input_files(str(challenge_file))
        page.wait_for_function("document.getElementById('challenge-status').textContent.startsWith('Challenge lab-test')")
        assert page.locator("#position").inner_text() == "Step 1 of 150"
        with page.expect_download() as download:
            page.locator("details summary").click()
            page.get_by_role("button", name="write proof.json").click()
        proof = tmp_path / "proof.json"
        download.value.save_as(proof)
    result = runner.invoke(app, ["bpe", "verify", str(proof), str(challenge_file)])
    assert result.exit_code == 0, result.output
    challenge = json.loads(challenge_file.read_text(encoding="utf-8"))
    assert json.loads(proof.read_text())["merges"] == [row.model_dump() for row in train_bpe(challenge["corpus"], 150)[1]]


@pytest.mark.parametrize("tamper", ["none", "frequency", "truncate", "challenge_id"])
def test_the_page_checks_a_proof_as_the_cli_does(tmp_path: Path, challenge_file: Path, tamper: str) -> None:
    proof = tmp_path / "proof.json"
    assert runner.invoke(app, ["bpe", "proof", str(challenge_file), "-o", str(proof)]).exit_code == 0
    document = json.loads(proof.read_text(encoding="utf-8"))
    if tamper == "frequency":
        document["merges"][41]["frequency"] += 1
    elif tamper == "truncate":
        document["merges"] = document["merges"][:100]
    elif tamper == "challenge_id":
        document["challenge_id"] = "someone-else"
    proof.write_text(json.dumps(document), encoding="utf-8")
    cli = runner.invoke(app, ["bpe", "verify", str(proof), str(challenge_file)])
    out = tmp_path / "lab.html"
    assert runner.invoke(app, ["bpe", "explore", "--challenge", str(challenge_file), "-o", str(out)]).exit_code == 0
    with browser_page() as page:
        page.goto(out.as_uri())
        page.locator("#check-proof").set_input_files(str(proof))
        status = page.locator("#proof-status")
        page.wait_for_function("document.getElementById('proof-status').textContent.length > 0")
        verdict = status.text_content()
    if tamper == "none":
        assert cli.exit_code == 0 and verdict.startswith("valid: 150 merges match")
    elif tamper == "challenge_id":
        assert cli.exit_code == 1 and "challenge_id" in cli.output and verdict.startswith("challenge_id: proof has")
    else:
        step = 42 if tamper == "frequency" else 101
        assert cli.exit_code == 1 and f"divergence at step {step}" in cli.output
        assert verdict.startswith(f"divergence at step {step}:")


def test_a_changed_or_malformed_input_is_refused_in_the_page(tmp_path: Path, challenge_file: Path) -> None:
    changed = json.loads(challenge_file.read_text(encoding="utf-8"))
    changed["corpus"][0] += "!"
    bad_challenge = tmp_path / "changed.json"
    bad_challenge.write_text(json.dumps(changed), encoding="utf-8")
    proof = tmp_path / "proof.json"
    assert runner.invoke(app, ["bpe", "proof", str(challenge_file), "-o", str(proof)]).exit_code == 0
    document = json.loads(proof.read_text(encoding="utf-8"))
    document["merges"][0]["frequency"] = str(document["merges"][0]["frequency"])  # as the CLI, a string is no count
    proof.write_text(json.dumps(document), encoding="utf-8")
    out = tmp_path / "lab.html"
    assert runner.invoke(app, ["bpe", "explore", "--challenge", str(challenge_file), "-o", str(out)]).exit_code == 0
    with browser_page() as page:
        page.goto(out.as_uri())
        page.locator("#check-proof").set_input_files(str(proof))
        page.wait_for_function("document.getElementById('proof-status').textContent.length > 0")
        assert page.locator("#proof-status").text_content().startswith("Refused: not a proof")
        page.locator("#load-challenge").set_input_files(str(bad_challenge))
        page.wait_for_function("document.getElementById('challenge-status').textContent.startsWith('Refused')")
        assert "corpus_sha256 mismatch" in page.locator("#challenge-status").inner_text()
    assert runner.invoke(app, ["bpe", "verify", str(proof), str(challenge_file)]).exit_code == 2
