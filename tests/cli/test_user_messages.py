"""Each refusal a new user meets says what is wrong and the fix, on one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.errors import InputError, InputsSkipped
from tokpack.preparing import prepare
from tokpack.vocab import BpeTokenizer

runner = CliRunner()


def one_line_error(args: list[str], env: dict[str, str] | None = None) -> str:
    result = runner.invoke(app, args, env=env)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:"), result.output
    return lines[0]


@pytest.fixture(scope="module")
def byte_vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return BpeTokenizer(ranks={bytes([b]): b for b in range(256)}).save(tmp_path_factory.mktemp("vocab"))


def test_a_missing_text_field_names_the_fields_and_the_flag(tmp_path: Path, byte_vocab: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"body": "hello", "id": 1}\n{"body": "world", "id": 2}\n', encoding="utf-8")
    line = one_line_error(["prepare", str(docs), "--vocab", str(byte_vocab), "--cache-dir", str(tmp_path / "c")])
    assert "record at byte 0 has no string field 'text' (its fields: 'body', 'id')" in line
    assert "--text-field NAME" in line


def test_a_later_bad_record_names_on_error_skip(tmp_path: Path, byte_vocab: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"body": "hello"}\n{"title": "no body"}\n', encoding="utf-8")
    line = one_line_error(["prepare", str(docs), "--vocab", str(byte_vocab), "--text-field", "body",
                           "--cache-dir", str(tmp_path / "c")])
    assert "record at byte 18 has no string field 'body' (its fields: 'title')" in line
    assert "--on-error skip" in line


def test_a_text_field_that_is_no_string_says_what_it_is(tmp_path: Path, byte_vocab: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"text": 5}\n', encoding="utf-8")
    args = ["prepare", str(docs), "--vocab", str(byte_vocab), "--cache-dir", str(tmp_path / "c")]
    assert one_line_error(args) == (f"error: {docs}: field 'text' of the record at byte 0 is a number (int), not a string; "
                                    "make it a string, or skip such records with --on-error skip")
    docs.write_text('{"text": "kept"}\n{"text": null}\n', encoding="utf-8")
    assert "field 'text' of the record at byte 17 is null, not a string" in one_line_error(args)
    assert runner.invoke(app, [*args, "--on-error", "skip"]).exit_code == 0  # the fix it names works


def test_a_lone_surrogate_in_a_record_names_on_error_skip(tmp_path: Path, byte_vocab: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"text": "fine"}\n{"text": "lone \\ud800"}\n', encoding="utf-8")
    args = ["prepare", str(docs), "--vocab", str(byte_vocab), "--cache-dir", str(tmp_path / "c")]
    assert one_line_error(args) == (f"error: {docs}: byte 17: field 'text' holds a lone surrogate (U+D800), which is not text; "
                                    "fix the record, or skip such records with --on-error skip")
    assert runner.invoke(app, [*args, "--on-error", "skip"]).exit_code == 0


@pytest.mark.parametrize("env", [{"SLURM_ARRAY_TASK_ID": "0"}, {}])
def test_a_shard_without_a_rank_names_the_flag(tmp_path: Path, byte_vocab: Path, env: dict[str, str]) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("one\ntwo\nthree\n", encoding="utf-8")
    made = runner.invoke(app, ["prepare", str(corpus), "--vocab", str(byte_vocab), "--shards", "2", "--engine", "array",
                               "--out", str(tmp_path / "adata")])
    assert made.exit_code == 0, made.output
    clean = {name: None for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                                     "TOKPACK_RANK", "TOKPACK_WORLD_SIZE")}
    line = one_line_error(["shard", "run", str(tmp_path / "adata")], env={**clean, **env})  # type: ignore[dict-item]
    assert "--rank N" in line and "SLURM_ARRAY_TASK_ID" in line and "SLURM_ARRAY_TASK_COUNT" in line


def test_each_array_task_says_whether_the_dataset_is_complete(tmp_path: Path, byte_vocab: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("one\ntwo\nthree\nfour\n", encoding="utf-8")
    job = tmp_path / "adata"
    made = runner.invoke(app, ["prepare", str(corpus), "--vocab", str(byte_vocab), "--shards", "2", "--engine", "array",
                               "--out", str(job)])
    assert made.exit_code == 0, made.output
    first = runner.invoke(app, ["shard", "run", str(job), "--rank", "1"], terminal_width=300)
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == "shard 1 of 2: written; 1 of 2 shards done (the last to finish writes dataset.json)"
    last = runner.invoke(app, ["shard", "run", str(job), "--rank", "0"], terminal_width=300)
    assert last.exit_code == 0, last.output
    assert last.stdout.strip() == f"shard 0 of 2: written; the dataset is complete: {job / 'dataset.json'}"
    again = runner.invoke(app, ["shard", "run", str(job), "--rank", "1"], terminal_width=300)
    assert again.stdout.strip() == f"shard 1 of 2: already complete; the dataset is complete: {job / 'dataset.json'}"


def test_rank_help_names_both_slurm_variables() -> None:
    shown = " ".join(runner.invoke(app, ["shard", "run", "--help"], terminal_width=300).output.split())
    assert "SLURM_ARRAY_TASK_ID" in shown and "SLURM_ARRAY_TASK_COUNT" in shown


def test_an_output_folder_of_other_settings_says_so(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n" * 200, encoding="utf-8")
    common = ["prepare", str(corpus), "-o", str(tmp_path / "pack"), "--cache-dir", str(tmp_path / "cache")]
    assert runner.invoke(app, [*common, "--vocab-size", "260"]).exit_code == 0
    line = one_line_error([*common, "--vocab-size", "262"])
    assert "pack: holds a pack made with other settings (vocabulary" in line and "ids)" in line
    assert "delete it, or write elsewhere with --out PATH" in line and "cached" not in line
    with pytest.raises(InputError, match="write elsewhere with out=PATH$"):
        prepare(corpus, vocab_size=262, out=tmp_path / "pack", cache_dir=tmp_path / "cache")


def test_a_rank_file_whose_merges_cannot_be_derived_is_named(tmp_path: Path) -> None:
    from tokpack.vocab.rank_files import rank_file_lines

    corpus, ranks = tmp_path / "c.txt", tmp_path / "odd.tiktoken"
    corpus.write_text("the cat sat on the mat\n" * 20, encoding="utf-8")
    ranks.write_bytes(rank_file_lines({bytes([b]): b for b in range(256)} | {b"zzz": 256}))
    line = one_line_error(["prepare", str(corpus), "--vocab", str(ranks), "--pattern", "gpt2",
                           "--cache-dir", str(tmp_path / "cache")])
    assert f"error: {ranks}: token b'zzz' (rank 256) cannot be built from lower ranks; " in line
    assert "was a line deleted or a rank changed?" in line


def test_a_too_small_document_bytes_names_the_flag(tmp_path: Path, byte_vocab: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"text": "hello"}\n', encoding="utf-8")
    line = one_line_error(["prepare", str(docs), "--vocab", str(byte_vocab), "--document-bytes", "2",
                           "--cache-dir", str(tmp_path / "c")])
    assert "--document-bytes must be an integer of at least 4, got 2" in line and "document_bytes" not in line


def test_an_empty_corpus_makes_an_empty_pack_with_a_warning(tmp_path: Path, byte_vocab: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    result = runner.invoke(app, ["prepare", str(empty), "--vocab", str(byte_vocab), "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert "warning: the corpus holds no text" in result.stderr and "documents" in result.stdout


def test_a_published_vocabulary_given_another_pattern_says_to_drop_it(tmp_path: Path, gpt2_rank_file: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Ala ma kota.\n", encoding="utf-8")
    line = one_line_error(["prepare", str(corpus), "--vocab", str(gpt2_rank_file), "--pattern", "gpt4",
                           "--cache-dir", str(tmp_path / "c")])
    assert "; --pattern contradicts it; drop --pattern: the" in line


def test_decoding_a_pack_of_ids_no_text_vocabulary_spells_names_its_scheme(tmp_path: Path) -> None:
    from tokpack.serve.memory import pack_of_documents

    pack = pack_of_documents([[1, 2, 3], [4, 5]], n_vocab=9, pad_id=0, directory=tmp_path / "games")
    line = one_line_error(["inspect", str(pack), "--decode", "0"])
    assert "holds 'list' ids, which no text vocabulary spells" in line and "written before" not in line


def test_the_summary_lists_the_ranges_in_the_packs_order(tmp_path: Path, byte_vocab: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(f'{{"text": "document {i}"}}\n' for i in range(20)), encoding="utf-8")
    shown = runner.invoke(app, ["prepare", str(docs), "--vocab", str(byte_vocab), "--validation", "0.1", "--test", "0.1",
                                "-o", str(tmp_path / "pack"), "--cache-dir", str(tmp_path / "c")], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    rows = [line.split()[1] for line in shown.stdout.splitlines() if line.split()[1:2] in (["train"], ["validation"], ["test"])]
    assert rows == ["train", "validation", "test"]  # as the pack holds them: training documents first


def test_another_split_of_a_split_json_lines_file_names_the_flags(tmp_path: Path, byte_vocab: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(f'{{"text": "document {i}"}}\n' for i in range(20)), encoding="utf-8")
    args = ["prepare", str(docs), "--vocab", str(byte_vocab), "-o", str(tmp_path / "pack"), "--cache-dir", str(tmp_path / "c")]
    assert runner.invoke(app, [*args, "--validation", "0.1"]).exit_code == 0
    line = one_line_error([*args, "--validation", "0.2"])
    assert line.endswith("delete it to split the corpus again, or drop --validation and --test to use it"), line
    assert runner.invoke(app, args).exit_code == 0  # the fix it names works


def test_the_inputs_on_error_skip_left_out_are_named(tmp_path: Path, byte_vocab: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a.txt").write_text("kept text\n", encoding="utf-8")
    (folder / "b.bin").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 4)
    (folder / "c.txt").write_bytes(b"latin-1 \xe9t\xe9\n")
    shown = runner.invoke(app, ["prepare", str(folder), "--vocab", str(byte_vocab), "--on-error", "skip",
                                "-o", str(tmp_path / "pack"), "--cache-dir", str(tmp_path / "c")], terminal_width=300)
    assert shown.exit_code == 0, shown.output
    said = [line for line in shown.stderr.splitlines() if line.startswith("warning:")]
    assert len(said) == 1 and said[0].startswith("warning: --on-error skip left out 2 files or records: "), shown.stderr
    assert f"{folder / 'b.bin'}: " in said[0] and f"{folder / 'c.txt'}: " in said[0]
    with pytest.warns(InputsSkipped, match="b.bin") as caught:
        prepare(folder, vocab=byte_vocab, on_error="skip", out=tmp_path / "again", cache_dir=tmp_path / "c2")
    assert [warning.message.count for warning in caught if isinstance(warning.message, InputsSkipped)] == [2]


def test_a_text_field_for_a_format_without_fields_is_refused_naming_the_format(tmp_path: Path, byte_vocab: Path) -> None:
    """JSON Lines saved as ``.json`` reads as one text file, JSON syntax and all: the text field
    asked for is never read, so it is refused, naming how the file is read and the fix."""
    records = tmp_path / "records.json"
    records.write_text('{"body": "hello", "id": 1}\n{"body": "world", "id": 2}\n', encoding="utf-8")
    line = one_line_error(["prepare", str(records), "--vocab", str(byte_vocab), "--text-field", "body",
                           "--cache-dir", str(tmp_path / "c")])
    assert line.startswith(f"error: {records}: ") and "--text-field" in line and "as one text file" in line, line
    assert ".jsonl" in line, line
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("hello\n", encoding="utf-8")
    line = one_line_error(["prepare", str(folder), "--vocab", str(byte_vocab), "--text-field", "body",
                           "--cache-dir", str(tmp_path / "c")])
    assert "--text-field" in line and "folder of text files" in line, line
    renamed = records.rename(tmp_path / "records.jsonl")
    assert runner.invoke(app, ["prepare", str(renamed), "--vocab", str(byte_vocab), "--text-field", "body",
                               "--cache-dir", str(tmp_path / "c")]).exit_code == 0  # the fix it names works
