"""Everyday use (issue 13): what a new user on their own corpus relies on."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tokpack import prepare
from tokpack.cli import app
from tokpack.corpus.sources import open_corpus

from conftest import DATA, REPO

runner = CliRunner()


def _two_halves(folder: Path) -> Path:
    """A folder whose files sort as: 20 documents of Polish, then 20 of Russian (real text)."""
    polish = sorted((DATA / "polish" / "narrative").glob("*.txt"))
    russian = (DATA / "other" / "scripts" / "wesnoth-ru.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    folder.mkdir()
    for index in range(20):
        (folder / f"a{index:02d}.txt").write_bytes(polish[index % len(polish)].read_bytes()[:3000])
        (folder / f"b{index:02d}.txt").write_text("".join(russian[index * 40 : index * 40 + 40]), encoding="utf-8")
    return folder


def test_the_vocabulary_sample_is_spread_over_the_whole_training_range(tmp_path: Path) -> None:
    corpus = _two_halves(tmp_path / "corpus")
    with open_corpus(corpus, document_bytes=4096) as source:
        total = int(source.unit_bytes(0, source.n_units).sum())
        sample = source.training_sample(total // 3)
        texts = list(sample)
        again = list(source.training_sample(total // 3))
    assert texts == again  # deterministic
    assert 0 < sample.n_bytes <= total // 3 and sample.n_pieces == len(texts) >= 8
    # A sample from the first bytes would be Polish only: the spread one has both scripts.
    assert any("ż" in text or "ł" in text for text in texts) and any("ы" in text for text in texts)
    assert sample.describe().endswith("documents, spread evenly over the range")

    prepared = prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=400, vocab_sample_bytes=total // 3)
    ids = prepared.tokenizer.encode("ы и ж")
    assert len(ids) < len("ы и ж".encode())  # Cyrillic made it into the merges
    assert prepared.vocabulary_sample is not None and "spread evenly over the range" in prepared.vocabulary_sample


def test_prepare_prints_what_the_vocabulary_was_trained_on(tmp_path: Path) -> None:
    corpus = _two_halves(tmp_path / "corpus")
    result = runner.invoke(app, ["prepare", str(corpus), "--cache-dir", str(tmp_path / "c"), "--vocab-size", "300",
                                 "--vocab-sample-bytes", "20000"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "documents, spread evenly over the range" in result.output and "trained on 0.0 of 0.1 MB (" in result.output


def test_prepare_cuts_validation_and_test_itself_on_document_boundaries(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"".join(p.read_bytes() for p in sorted((DATA / "polish" / "narrative").glob("*.txt"))[:8]))
    result = runner.invoke(app, ["prepare", str(corpus), "--validation", "0.1", "--test", "0.05", "--vocab-size", "300",
                                 "--document-bytes", "2048", "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "pack"),
                                 "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    manifest = json.loads((tmp_path / "corpus.txt.manifest.json").read_text())
    assert manifest["made_by"] == {"validation": 0.1, "test": 0.05, "document_bytes": 2048}
    n = corpus.stat().st_size
    (train_start, a), (a2, b), (b2, end) = manifest["ranges"]["train"], manifest["ranges"]["validation"], manifest["ranges"]["test"]
    assert train_start == 0 and a == a2 and b == b2 and end == n
    assert abs(b - a - 0.1 * n) < 2048 and abs(end - b - 0.05 * n) < 2048
    data = corpus.read_bytes()
    assert data[a - 1 : a] == b"\n" and data[b - 1 : b] == b"\n"  # each range starts a document
    assert printed["pack"] == str(tmp_path / "pack") and (tmp_path / "pack" / "meta.json").is_file()
    assert set(printed["ranges"]) == {"train", "validation", "test"}
    assert printed["ranges"]["validation"]["source_bytes"] == [a, b]
    # The same request again reuses the manifest and the pack; another one is refused, one line.
    again = runner.invoke(app, ["prepare", str(corpus), "--validation", "0.1", "--test", "0.05", "--vocab-size", "300",
                                "--document-bytes", "2048", "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "pack"), "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["n_tokens"] == printed["n_tokens"]
    other = runner.invoke(app, ["prepare", str(corpus), "--validation", "0.2", "--document-bytes", "2048",
                                "--cache-dir", str(tmp_path / "c")])
    assert other.exit_code == 2 and "manifest.json: already there with other ranges" in other.output


def test_inspect_json_is_the_record_and_long_paths_are_never_cut(tmp_path: Path) -> None:
    deep = tmp_path / ("a-rather-long-folder-name-" * 6) / "pack"
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((DATA / "polish" / "narrative" / sorted(p.name for p in (DATA / "polish" / "narrative").glob("*.txt"))[0]).read_bytes())
    made = runner.invoke(app, ["prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "c"), "--out", str(deep)],
                         env={"COLUMNS": "60"})
    assert made.exit_code == 0, made.output
    assert str(deep) in made.output.replace("\n", "") and "…" not in made.output
    shown = runner.invoke(app, ["inspect", str(deep), "--verify", "--json"])
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.stdout)
    assert record["verified"] is True and record["schema"].startswith("tokpack.") and record["n_tokens"] > 0


def _commands() -> list[list[str]]:
    import click
    import typer.main

    found: list[list[str]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        found.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_every_command_takes_dash_h_and_its_help_is_plain_text() -> None:
    commands = _commands()
    assert ["prepare"] in commands and ["tokenizer", "train"] in commands and len(commands) > 12
    for path in commands:
        result = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "120"})
        assert result.exit_code == 0, (path, result.output)
        for leak in ("<bool>", "``", ":func:", ":class:", "[bold", "\x1b["):
            assert leak not in result.output, (path, leak)
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.startswith("tokpack ")


def test_one_grammar_for_outputs_sizes_trainers_and_choices(tmp_path: Path) -> None:
    import inspect

    from tokpack.cli import corpus as corpus_cli
    from tokpack.cli import tokenizer as tokenizer_cli
    from tokpack.grading.training import TrainingRecipe

    # Every option that names a file or folder to write is --out with -o.
    for path in _commands():
        options = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "200"}).output
        declared = [line.split()[:3] for line in options.splitlines() if line.startswith("  -")]
        if any("--output" in names or "--out" in names for names in declared):
            assert any(names[:2] == ["-o,", "--out,"] or names[:2] == ["-o,", "--out"] for names in declared), path
    # --vocab-size counts ids, <|endoftext|> included, in prepare as in tokenizer train.
    corpus = tmp_path / "c.txt"
    corpus.write_bytes((DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt").read_bytes()[:30_000])
    made = runner.invoke(app, ["prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "c"), "--json",
                               "--pattern", "gpt4", "--trainer", "hf"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["vocabulary"]["n_vocab"] == 300
    # The same default trainer everywhere, offered as choices rather than checked by hand.
    prepare_default = inspect.signature(corpus_cli.prepare_command).parameters["trainer"].default.default
    train_default = inspect.signature(tokenizer_cli.train).parameters["trainer"].default.default
    assert prepare_default.value == train_default.value == TrainingRecipe(vocab_size=300).trainer == "exact"
    assert inspect.signature(prepare).parameters["trainer"].default == "exact"
    bad = runner.invoke(app, ["prepare", str(corpus), "--on-error", "ignore"])
    assert bad.exit_code == 2 and "error: Invalid value for '--on-error': 'ignore' is not one of 'raise', 'skip'" in bad.output


def test_an_exported_tokenizer_loads_in_transformers_with_eos_and_pad(tmp_path: Path) -> None:
    import transformers

    from tokpack import load_vocabulary

    corpus = tmp_path / "train" / "dialogue"
    corpus.mkdir(parents=True)
    for source in sorted((DATA / "polish" / "dialogue").glob("*.txt"))[:3]:
        (corpus / source.name).write_bytes(source.read_bytes()[:40_000])
    out = tmp_path / "tok" / "tokenizer.json"
    made = runner.invoke(app, ["tokenizer", "train", str(tmp_path / "train"), "-o", str(out), "--vocab-size", "400"])
    assert made.exit_code == 0, made.output
    ours = load_vocabulary(out)
    for folder in (out.parent, REPO / "artifacts" / "polish-8192"):
        fast = transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))
        eot = len(fast) - 1
        assert (fast.eos_token, fast.pad_token, fast.eos_token_id, fast.pad_token_id) == ("<|endoftext|>", "<|endoftext|>", eot, eot)
        auto = transformers.AutoTokenizer.from_pretrained(str(folder))
        assert auto.pad_token_id == eot
        text = "Zażółć  gęślą jaźń 🙂\r\n\tx  ."
        ids = fast(text, add_special_tokens=False)["input_ids"]
        assert fast.decode(ids) == text  # no clean-up of spaces: the text comes back
        if folder == out.parent:
            assert ids == ours.encode(text)
        batch = fast(["a", "ab cd ef"], padding=True)["input_ids"]
        assert batch[0][-1] == eot and len(batch[0]) == len(batch[1])


def test_prepare_with_a_rank_file_parses_it_once_and_hashes_it_once(tmp_path: Path, monkeypatch, gpt2_rank_file: Path) -> None:
    import tokpack.vocab.bytelevel as bytelevel
    import tokpack.vocab.loading as loading
    import tokpack.vocab.rank_files as rank_files

    calls = {"parse": 0, "canonical": 0}
    parse, canonical = rank_files.parse_rank_text, bytelevel.BpeTokenizer.canonical_bytes

    def counting_parse(text: bytes, *, where: object) -> tuple[dict[bytes, int], bool]:
        calls["parse"] += where == gpt2_rank_file  # the user's file (a pack's own copy is read to verify it)
        return parse(text, where=where)

    def counting_canonical(self: bytelevel.BpeTokenizer) -> bytes:
        calls["canonical"] += 1
        return canonical(self)

    for module in (rank_files, loading, bytelevel):
        if hasattr(module, "parse_rank_text"):
            monkeypatch.setattr(module, "parse_rank_text", counting_parse)
    monkeypatch.setattr(bytelevel.BpeTokenizer, "canonical_bytes", counting_canonical)
    corpus = tmp_path / "c.txt"
    corpus.write_bytes((DATA / "other" / "english" / "wesnoth-narrative-en.txt").read_bytes()[:50_000])
    for run in ("first", "cached"):
        calls.update(parse=0, canonical=0)
        prepared = prepare(corpus, vocab=gpt2_rank_file, cache_dir=tmp_path / "cache")
        assert prepared.n_vocab == 50257 and prepared.meta.n_tokens > 0
        # Hashed once for the request; once more when the new pack's carried vocabulary is checked
        # against its record on first verification (the cached run's stamp skips that).
        assert calls["parse"] == 1 and 1 <= calls["canonical"] <= 2, (run, calls)


def test_ci_runs_ruff_and_mypy_before_the_tests_and_both_pass() -> None:
    import subprocess
    import sys

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.index("./dev lint") < ci.index("./dev test")
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    assert config["ruff"]["lint"]["select"] and config["mypy"]["files"] == ["src"]
    for tool in (["ruff", "check"], ["mypy"]):
        result = subprocess.run([sys.executable, "-m", *tool], cwd=REPO, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_dead_code_and_duplicates_are_gone() -> None:
    import inspect

    import tokpack.chess.jobs.pack as chess_pack
    import tokpack.grading.grade as grade
    import tokpack.vocab.loading as loading
    import tokpack.vocab.merge_files as merge_files

    assert not hasattr(merge_files, "write_gpt2_pair")  # written by nothing, read by nothing
    assert grade.is_tokpack_record is loading.is_tokpack_record and not hasattr(grade, "_is_tokpack_record")
    assert "file_sha256(path)" in inspect.getsource(chess_pack.table_source) and "hashlib" not in inspect.getsource(chess_pack)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table_end = readme.index("| `bench/` |")
    assert readme[table_end:].split("\n", 2)[1] == ""  # the Layout table ends with a blank line, no stray text


def test_extension_points_are_dicts_and_the_store_has_no_import_circle(tmp_path: Path) -> None:
    import ast
    import inspect

    import pytest

    import tokpack.cli.corpus as corpus_cli
    from tokpack.corpus.sources import FORMATS, JsonLines, TextFile
    from tokpack.engines import EXECUTORS, prepare_sharded, run_array_task
    from tokpack.errors import InputError
    from tokpack.preparing.preparation import TRAINERS

    assert FORMATS["text"] is TextFile and FORMATS["jsonl"] is JsonLines and set(TRAINERS) == {"exact", "hf"}
    assert set(EXECUTORS) == {"local", "ray"}
    corpus = tmp_path / "c.txt"
    corpus.write_text("dobry tekst\n", encoding="utf-8")
    with pytest.raises(InputError, match="engine must be one of local, ray"):
        prepare_sharded(corpus, tmp_path / "d", vocab=REPO / "artifacts" / "polish-8192" / "tokenizer.json", shards=2, engine="slurm")
    assert not (tmp_path / "d").exists()  # refused before anything was written

    source = ast.parse((REPO / "src" / "tokpack" / "store" / "source.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(source) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"tokpack.store.dataset", "tokpack.store.reader"}

    # The array engine's checks live in the library; the command only prints.
    from tokpack.engines import start_job

    start_job(corpus, tmp_path / "job", vocab=REPO / "artifacts" / "polish-8192" / "tokenizer.json", shards=2)
    with pytest.raises(InputError, match="job array has 3 tasks but the job has 2 shards"):
        run_array_task(tmp_path / "job", environment={"TOKPACK_RANK": "0", "TOKPACK_WORLD_SIZE": "3"})
    assert run_array_task(tmp_path / "job", environment={"TOKPACK_RANK": "1", "TOKPACK_WORLD_SIZE": "2"}) == (1, 2, True)
    assert "world != " not in inspect.getsource(corpus_cli.shard_run_command)


def test_the_core_installs_without_extras_and_a_command_names_the_extra_it_lacks(tmp_path: Path) -> None:
    import subprocess
    import sys

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = " ".join(project["dependencies"])
    for optional in ("chess", "matplotlib", "sentencepiece", "ray", "torch"):
        assert optional not in core, optional
    assert {"chess", "grading", "report", "ray", "torch"} <= set(project["optional-dependencies"])
    # Without python-chess (hidden from this child), the CLI still starts and the chess command
    # says which extra to install, in one line, exit 2.
    # An import hook in the child, as if neither package were installed (no module is replaced).
    hide = ("import sys\n"
            "class Hidden:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('chess', 'matplotlib'):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Hidden())\n"
            "from tokpack.cli import main; sys.argv[0] = 'tokpack'; main()\n")
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    helped = subprocess.run([sys.executable, "-c", hide, "-h"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "prepare" in helped.stdout, helped.stderr
    pgn = tmp_path / "g.pgn"
    pgn.write_text('[Event "x"]\n\n1. e4 e5 1-0\n', encoding="utf-8")
    chess = subprocess.run([sys.executable, "-c", hide, "chess", "convert", str(pgn), "-o", str(tmp_path / "out")],
                           capture_output=True, text=True, env=env)
    assert chess.returncode == 2 and chess.stderr.strip().splitlines() == [
        "error: chess games (python-chess) need the chess extra: pip install 'tokpack[chess]'"], chess.stderr


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
