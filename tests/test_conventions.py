"""The project's conventions, checked: CI lints before it tests and both pass, no dead code or duplicate
helpers, extension points are registries (dicts), the core installs without extras and a command
names the extra it lacks."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO


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


def test_the_library_names_parameters_not_flags() -> None:
    """No error raised outside ``tokpack/cli/`` names one of tokpack's command-line flags: a Python
    caller reads its parameters' names (the CLI says flags). Other tools' commands (``ray start
    --head``, ``sbatch --array``) may be named in a fix."""
    import ast
    import re

    flag = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
    other_tools = re.compile(r"(?:ray start|sbatch) --[a-z]+")
    found = []
    for path in sorted((REPO / "src" / "tokpack").rglob("*.py")):
        if "cli" in path.relative_to(REPO / "src" / "tokpack").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                found += [f"{path.relative_to(REPO)}:{node.lineno}: {text!r}" for sub in ast.walk(node.exc)
                          if isinstance(sub, ast.Constant) and isinstance(sub.value, str)
                          and flag.search(text := other_tools.sub("", sub.value))]
    assert not found, "\n".join(found)
