"""The shipped tokenizer (artifacts/polish-8192): exactly 8,192 ids, lossless on the torture set and
every data file, the same ids in tokenizers, transformers and tiktoken, passing `grade` on the
validation split reproduced from the data, and beating the baselines trained on the same split."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer
from typer.testing import CliRunner

from tokpack import load_vocabulary
from tokpack.cli import app
from tokpack.grading import baselines
from tokpack.grading.files import corpus_files, read_document
from tokpack.grading.grade import GradeReport, grade, load_counter
from tokpack.grading.manifest import UNKNOWN
from tokpack.grading.split import TRAIN, VALIDATION, plan_split, write_split
from tokpack.grading.torture import TORTURE_SET, check_round_trip, file_cases, structure_report
from tokpack.grading.training import weighted_documents
from tokpack.vocab import BpeTokenizer

from tokenizer_fixtures import ARTIFACT, OTHER, POLISH, require_data

TOKENIZER_JSON = ARTIFACT / "tokenizer.json"
runner = CliRunner()


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((ARTIFACT / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory: pytest.TempPathFactory, manifest: dict) -> Path:
    """The artifact's split, made again from the data with the manifest's settings."""
    require_data()
    recorded = manifest["split"]
    record = plan_split(POLISH, validation=recorded["validation_fraction"], seed=recorded["seed"])
    assert record.validation == recorded["validation_files"]
    out = tmp_path_factory.mktemp("split") / "split"
    write_split(record, out)
    return out


@pytest.fixture(scope="module")
def graded(split_dir: Path) -> GradeReport:
    return grade(load_counter(TOKENIZER_JSON), split_dir / VALIDATION)


def test_exactly_8192_ids_all_bytes_no_normalizer() -> None:
    hf = Tokenizer.from_file(str(TOKENIZER_JSON))
    assert hf.get_vocab_size(with_added_tokens=True) == 8192
    report = structure_report(TOKENIZER_JSON)
    assert report.problems == []
    assert report.summary == "8192 ids (8192 in the model + 0 added), 256 of 256 bytes, no normalizer"  # <|endoftext|> too


def test_rank_file_and_tokenizer_json_are_one_vocabulary(manifest: dict) -> None:
    from_ranks = BpeTokenizer.load_saved(ARTIFACT / "vocabulary.json")  # ranks.tiktoken + pattern
    from_json = load_vocabulary(TOKENIZER_JSON)  # what prepare() would load
    assert from_ranks.identity == from_json.identity
    assert from_ranks.n_vocab == 8192 and from_ranks.eot_id == 8191
    assert manifest["identity"] == from_json.identity.model_dump(mode="json", by_alias=True)
    for name, sha256 in manifest["files"].items():
        assert hashlib.sha256((ARTIFACT / name).read_bytes()).hexdigest() == sha256, name


def test_manifest_names_every_source_with_a_licence(manifest: dict) -> None:
    assert manifest["sources"], "no sources"
    assert all(source["licence"] != UNKNOWN for source in manifest["sources"])
    assert sum(manifest["licences"].values()) == len(manifest["sources"])
    assert "validation files never entered training" in manifest["data_preparation"]


def test_lossless_and_same_ids_on_torture_set_and_every_data_file() -> None:
    """Both engines decode every text to itself, and tiktoken's ids equal tokenizers' ids."""
    require_data()
    files = [*corpus_files(POLISH).files, *corpus_files(OTHER).files]
    report = check_round_trip(TOKENIZER_JSON, [*TORTURE_SET, *file_cases(files)])
    assert report.engines == ("tokenizers", "tiktoken")
    assert report.texts == len(TORTURE_SET) + len(files)
    assert report.failures == []


def test_transformers_gives_the_same_ids(split_dir: Path) -> None:
    transformers = pytest.importorskip("transformers")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER_JSON))
    hf = Tokenizer.from_file(str(TOKENIZER_JSON))
    texts = [case.text for case in TORTURE_SET] + [read_document(p) for p in corpus_files(split_dir / VALIDATION)]
    for text in texts:
        ids = fast(text, add_special_tokens=False)["input_ids"]
        assert ids == hf.encode(text, add_special_tokens=False).ids
        assert fast.decode(ids) == text
    assert len(fast) == 8192


def test_grade_passes_default_thresholds_on_the_validation_split(split_dir: Path, graded: GradeReport) -> None:
    assert graded.passed, graded
    assert graded.chars_per_token >= 3.30
    assert all(domain.chars_per_token >= 2.50 for domain in graded.domains)
    assert {domain.domain for domain in graded.domains} == {"code", "dialogue", "narrative", "numbers", "technical"}
    result = runner.invoke(app, ["tokenizer", "grade", str(TOKENIZER_JSON), str(split_dir / VALIDATION)])
    assert result.exit_code == 0, result.output


def _weakest(report: GradeReport) -> float:
    return min(domain.chars_per_token for domain in report.domains)


@pytest.mark.parametrize("baseline", ["hf-default", "sentencepiece", "sentencepiece-lossless", "gpt2"])
def test_beats_the_baseline_globally_and_in_the_weakest_domain(baseline: str, split_dir: Path, graded: GradeReport,
                                                               request: pytest.FixtureRequest) -> None:
    texts, _ = weighted_documents([split_dir / TRAIN], {})
    try:
        counter = {
            "hf-default": lambda: baselines.hf_default_counter(texts, 8192),
            "sentencepiece": lambda: baselines.sentencepiece_counter(texts, 8192),
            "sentencepiece-lossless": lambda: baselines.sentencepiece_counter(texts, 8192, lossless=True),
            # GPT-2's ranks as the suite keeps them (fetched from PyPI once, not by every run)
            "gpt2": lambda: baselines.gpt2_counter(request.getfixturevalue("gpt2_rank_file").parent),
        }[baseline]()
    except ValueError as error:
        pytest.skip(f"{baseline} baseline unavailable: {error}")
    other = grade(counter, split_dir / VALIDATION)
    assert graded.chars_per_token > other.chars_per_token
    assert _weakest(graded) > _weakest(other)


def test_prepare_packs_a_corpus_with_the_shipped_tokenizer(tmp_path: Path) -> None:
    from tokpack.preparing.preparation import prepare

    require_data()
    folder = tmp_path / "corpus"
    folder.mkdir()
    sources = sorted((POLISH / "narrative").iterdir())[:2]
    for source in sources:
        (folder / source.name).write_bytes(source.read_bytes())
    prepared = prepare(folder, vocab=TOKENIZER_JSON, cache_dir=tmp_path / "cache")
    expected = load_vocabulary(TOKENIZER_JSON)
    assert prepared.identity == expected.identity and prepared.n_vocab == 8192
    pack = prepared.pack()
    packed = pack.take(np.arange(pack.n_tokens))
    assert packed.max() < 8191  # corpus text never produces <|endoftext|>
    joined = b"".join(expected.decode_bytes(pack.document(i).tolist()) for i in range(pack.n_docs))
    assert joined == b"".join(source.read_bytes() for source in sources)
