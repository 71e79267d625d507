"""Challenges and proofs through the command line: make, verify, tamper, refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_bpe_data import DATA
from typer.testing import CliRunner

from tokpack.bpe import train_bpe
from tokpack.bpe.challenge import ChallengeRefused, Limits, make_proof, new_challenge, verify_proof
from tokpack.bpe.records import Challenge
from tokpack.cli import app

runner = CliRunner()
NUM_MERGES = 300


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    """A few KB of real Polish dialogue, cut into lines (each line one document)."""
    path = DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt"
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[:60] + ["", "a", "🙂🙂", lines[0]]  # an empty document, one byte, emoji, a duplicate


def _write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture()
def challenge_file(tmp_path: Path, corpus: list[str]) -> Path:
    challenge = new_challenge(corpus, NUM_MERGES, challenge_id="m0-test", expires_at="2999-01-01", hint="kept")
    return _write(tmp_path / "challenge.json", challenge.model_dump(mode="json"))


def _proof(tmp_path: Path, challenge_file: Path) -> Path:
    result = runner.invoke(app, ["bpe", "proof", str(challenge_file), "-o", str(tmp_path / "proof.json")])
    assert result.exit_code == 0, result.output
    return tmp_path / "proof.json"


def test_proof_has_the_format_and_verifies(tmp_path: Path, challenge_file: Path, corpus: list[str]) -> None:
    proof_path = _proof(tmp_path, challenge_file)
    document = json.loads(proof_path.read_text(encoding="utf-8"))
    assert set(document) == {"challenge_id", "corpus_sha256", "num_merges", "merges", "implementation"}
    assert len(document["merges"]) == NUM_MERGES
    assert set(document["merges"][0]) == {"left_id", "right_id", "result_id", "frequency"}
    _, trace = train_bpe(corpus, NUM_MERGES)
    assert document["merges"] == [row.model_dump() for row in trace]
    result = runner.invoke(app, ["bpe", "verify", str(proof_path), str(challenge_file)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output


@pytest.mark.parametrize("step", [1, 137, NUM_MERGES])
@pytest.mark.parametrize("field", ["frequency", "right_id"])
def test_one_changed_row_is_reported_at_exactly_that_step(
    tmp_path: Path, challenge_file: Path, step: int, field: str
) -> None:
    proof_path = _proof(tmp_path, challenge_file)
    document = json.loads(proof_path.read_text(encoding="utf-8"))
    original = dict(document["merges"][step - 1])
    document["merges"][step - 1][field] += 1
    _write(proof_path, document)
    result = runner.invoke(app, ["bpe", "verify", str(proof_path), str(challenge_file)])
    assert result.exit_code == 1, result.output
    assert f"divergence at step {step}" in result.output
    assert f"divergence at step {step + 1}" not in result.output
    # Both rows are shown: the reference one and the tampered one.
    assert str(original[field]) in result.output and str(original[field] + 1) in result.output
    assert "reference pair" in result.output


def test_divergence_shows_the_sequences_around_each_pair(challenge_file: Path) -> None:
    challenge = Challenge.model_validate_json(challenge_file.read_text(encoding="utf-8"))
    proof = make_proof(challenge)
    rows = list(proof.merges)
    rows[4] = rows[4].model_copy(update={"left_id": rows[5].left_id, "right_id": rows[5].right_id})
    outcome = verify_proof(proof.model_copy(update={"merges": rows}), challenge)
    assert (outcome.valid, outcome.step) == (False, 5)
    assert outcome.expected == proof.merges[4] and outcome.claimed == rows[4]
    assert outcome.expected_count == proof.merges[4].frequency
    excerpt = outcome.expected_excerpts[0]
    assert excerpt.pair == [proof.merges[4].left_id, proof.merges[4].right_id]
    assert excerpt.document >= 0 and outcome.claimed_excerpts


def test_truncated_proof_diverges_where_it_stops(tmp_path: Path, challenge_file: Path) -> None:
    proof_path = _proof(tmp_path, challenge_file)
    document = json.loads(proof_path.read_text(encoding="utf-8"))
    document["merges"] = document["merges"][:200]
    _write(proof_path, document)
    result = runner.invoke(app, ["bpe", "verify", str(proof_path), str(challenge_file)])
    assert result.exit_code == 1 and "divergence at step 201" in result.output


def test_rows_past_the_last_possible_merge_are_a_divergence(tmp_path: Path) -> None:
    challenge = new_challenge(["ab", "b"], 3, challenge_id="short")
    proof = make_proof(challenge)
    assert len(proof.merges) == 1  # no pair is left after (97, 98)
    extra = proof.merges[0].model_copy(update={"left_id": 256, "right_id": 98, "result_id": 257})
    outcome = verify_proof(proof.model_copy(update={"merges": [*proof.merges, extra]}), challenge)
    assert (outcome.step, outcome.problem, outcome.expected, outcome.claimed_count) == (2, "the proof has extra rows", None, 0)
    assert outcome.agreed == [(97, 98)]


def test_proof_for_another_challenge_is_a_divergence(tmp_path: Path, challenge_file: Path) -> None:
    proof_path = _proof(tmp_path, challenge_file)
    document = json.loads(proof_path.read_text(encoding="utf-8"))
    document["challenge_id"] = "someone-else"
    _write(proof_path, document)
    result = runner.invoke(app, ["bpe", "verify", str(proof_path), str(challenge_file)])
    assert result.exit_code == 1 and "challenge_id" in result.output


def test_changed_corpus_is_refused_naming_the_mismatch(tmp_path: Path, challenge_file: Path) -> None:
    document = json.loads(challenge_file.read_text(encoding="utf-8"))
    document["corpus"][3] += "!"
    _write(challenge_file, document)
    result = runner.invoke(app, ["bpe", "proof", str(challenge_file), "-o", str(tmp_path / "p.json")])
    assert result.exit_code == 2
    assert "corpus_sha256 mismatch" in result.output and str(challenge_file) in result.output
    assert not (tmp_path / "p.json").exists()


def test_expired_challenge_is_refused_with_its_date(tmp_path: Path, corpus: list[str]) -> None:
    challenge = new_challenge(corpus[:5], 10, challenge_id="old", expires_at="2020-05-01T12:00:00Z")
    path = _write(tmp_path / "challenge.json", challenge.model_dump(mode="json"))
    result = runner.invoke(app, ["bpe", "proof", str(path), "-o", str(tmp_path / "p.json")])
    assert result.exit_code == 2 and "expired at 2020-05-01T12:00:00+00:00" in result.output
    # An old proof can still be audited against it on request.
    proof = make_proof(challenge.model_copy(update={"expires_at": None}))
    (tmp_path / "p.json").write_text(proof.to_json(), encoding="utf-8")
    refused = runner.invoke(app, ["bpe", "verify", str(tmp_path / "p.json"), str(path)])
    assert refused.exit_code == 2
    audited = runner.invoke(app, ["bpe", "verify", str(tmp_path / "p.json"), str(path), "--ignore-expiry"])
    assert audited.exit_code == 0, audited.output


def test_extra_challenge_fields_are_kept(challenge_file: Path) -> None:
    challenge = Challenge.model_validate_json(challenge_file.read_text(encoding="utf-8"))
    assert challenge.extra_fields == {"expires_at": "2999-01-01", "hint": "kept"}
    assert json.loads(challenge.to_json())["hint"] == "kept"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"challenge_id": "x", "corpus": [', "byte 33: invalid JSON"),
        (b'{"challenge_id": "x"}', "corpus: Field required"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_unreadable_input_exits_2_naming_the_file(tmp_path: Path, challenge_file: Path, content: bytes, expected: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    for args in (["proof", str(bad)], ["verify", str(bad), str(challenge_file)], ["verify", str(_proof(tmp_path, challenge_file)), str(bad)]):
        result = runner.invoke(app, ["bpe", *args])
        assert result.exit_code == 2, result.output
        assert str(bad) in result.output and "Traceback" not in result.output
    assert expected in runner.invoke(app, ["bpe", "proof", str(bad)]).output
    missing = runner.invoke(app, ["bpe", "verify", str(tmp_path / "nope.json"), str(challenge_file)])
    assert missing.exit_code == 2 and "nope.json" in missing.output


def test_unwritable_output_exits_2_naming_it(tmp_path: Path, challenge_file: Path) -> None:
    target = tmp_path / "missing-folder" / "proof.json"
    result = runner.invoke(app, ["bpe", "proof", str(challenge_file), "-o", str(target)])
    assert result.exit_code == 2 and str(target) in result.output and "Traceback" not in result.output


def test_explain_shows_counts_tie_rule_and_sequences() -> None:
    result = runner.invoke(app, ["bpe", "explain", "ab", "ac", "--merges", "2"])
    assert result.exit_code == 0, result.output
    assert "tie at count 1 between 2 pairs: the smallest, (97, 98), wins" in result.output
    assert "doc 0: [97, 98] -> [256]" in result.output
    lesson = runner.invoke(app, ["bpe", "explain", "abab", "abab", "baba", "aaaa", "-n", "2"])
    assert "frequency 3, replaced 2 times" in lesson.output


def test_a_string_frequency_is_a_malformed_proof(tmp_path: Path, challenge_file: Path) -> None:
    # "frequency": "5" is a string, not the number 5: the proof is malformed.
    proof_path = _proof(tmp_path, challenge_file)
    document = json.loads(proof_path.read_text(encoding="utf-8"))
    document["merges"][0]["frequency"] = str(document["merges"][0]["frequency"])
    _write(proof_path, document)
    result = runner.invoke(app, ["bpe", "verify", str(proof_path), str(challenge_file)])
    assert result.exit_code == 2, result.output
    assert "merges.0.frequency: Input should be a valid integer" in result.output and str(proof_path) in result.output


def test_a_valid_proof_is_verified_without_the_reference_walk(
    tmp_path: Path, challenge_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A valid proof is checked merge by merge, without walking the reference trainer.
    import tokpack.bpe.challenge as challenge_module

    proof_path = _proof(tmp_path, challenge_file)

    def no_walk(*args: object, **kwargs: object) -> None:
        raise AssertionError("the reference walk ran for a valid proof")

    monkeypatch.setattr(challenge_module, "walk", no_walk)
    result = runner.invoke(app, ["bpe", "verify", str(proof_path), str(challenge_file)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", ["proof", "verify"])
def test_a_challenge_over_the_limits_is_refused(tmp_path: Path, challenge_file: Path, command: str) -> None:
    proof_path = _proof(tmp_path, challenge_file)
    base = ["bpe", "proof", str(challenge_file), "-o", str(tmp_path / "p.json")] if command == "proof" else [
        "bpe", "verify", str(proof_path), str(challenge_file)]
    too_big = runner.invoke(app, [*base, "--max-corpus-bytes", "100"])
    assert too_big.exit_code == 2 and "over the limit of 100; raise --max-corpus-bytes" in too_big.output
    too_many = runner.invoke(app, [*base, "--max-merges", "10"])
    assert too_many.exit_code == 2 and f"num_merges {NUM_MERGES} is over the limit of 10; raise --max-merges" in too_many.output
    assert runner.invoke(app, base).exit_code == 0  # the defaults admit it


def test_a_python_caller_over_the_limits_reads_the_limits_it_passed(challenge_file: Path) -> None:
    challenge = Challenge.model_validate_json(challenge_file.read_text(encoding="utf-8"))
    with pytest.raises(ChallengeRefused, match="over the limit of 100; raise max_corpus_bytes if this is intended$"):
        make_proof(challenge, limits=Limits(max_corpus_bytes=100))
    with pytest.raises(ChallengeRefused, match="over the limit of 10; raise max_merges if this is intended$"):
        make_proof(challenge, limits=Limits(max_merges=10))
    expired = challenge.model_copy(update={"expires_at": "2020-05-01"})
    with pytest.raises(ChallengeRefused, match="an old proof is checked against it with ignore_expiry=True$"):
        make_proof(expired)


def test_the_default_limits_refuse_a_50_mb_challenge_of_1000_merges(tmp_path: Path) -> None:
    # 50 MB x 1,000 merges would hold a grading server for minutes: refused before any training.
    corpus = ["ab" * 500_000] * 50
    challenge = new_challenge(corpus, 1000, challenge_id="huge")
    path = _write(tmp_path / "huge.json", challenge.model_dump(mode="json"))
    result = runner.invoke(app, ["bpe", "proof", str(path), "-o", str(tmp_path / "p.json")])
    assert result.exit_code == 2 and "over the limit" in result.output


def test_a_divergence_too_large_to_replay_is_still_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import tokpack.bpe.challenge as challenge_module

    monkeypatch.setattr(challenge_module, "EXPLAIN_BUDGET", 0)
    challenge = new_challenge(["abab", "abab", "baba", "aaaa"], 3, challenge_id="tiny")
    proof = make_proof(challenge)
    rows = [*proof.merges[:2], proof.merges[2].model_copy(update={"frequency": 9})]
    outcome = verify_proof(proof.model_copy(update={"merges": rows}), challenge)
    assert (outcome.valid, outcome.step, outcome.expected, outcome.claimed) == (False, 3, proof.merges[2], rows[2])
    assert "too large to replay" in outcome.problem and outcome.expected_count == 2 and outcome.claimed_count is None
