"""The README and every guide in docs/ hold what they show: their Python runs, their `tokpack`
command lines name commands and flags that exist, and their links lead somewhere.

A ```python block runs unless an HTML comment right before it says why not
(``<!-- not run: needs a GPU -->``); a file's runnable blocks run in order, in one fresh process,
in an empty working folder with an empty ``TOKPACK_CACHE``.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [REPO / "README.md", *DOCS]
BENCHMARKS = REPO / "BENCHMARKS.md"
FENCE = re.compile(r"^```(\w*)\s*$")
NOT_RUN = re.compile(r"^<!-- not run: (\S.*?) -->$")
#: What a page's run must print (beyond exiting 0), by page.
PRINTS = {"README.md": r"\(16, 64\) \(16, 64\)", "serving.md": r"loss \d"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    not_run: str | None  # the reason given, for a block that does not run


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        assert end is not None, f"{page.name}:{i + 1}: a code block is never closed"
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        reason = NOT_RUN.match(before.strip())
        found.append(Block(page, i + 1, opening.group(1), "\n".join(lines[i + 1:end]) + "\n",
                           reason.group(1) if reason else None))
        i = end + 1
    return found


def runnable(page: Path) -> str:
    return "".join(b.code for b in blocks(page) if b.language == "python" and b.not_run is None)


def test_every_page_has_python_or_commands_and_not_run_says_why() -> None:
    for page in PAGES:
        for block in blocks(page):
            assert block.language in {"", "python", "bash", "console", "toml"}, f"{page.name}:{block.line}"
            if block.not_run is not None:
                assert block.language == "python" and len(block.not_run) > 10, f"{page.name}:{block.line}"
        markers = [line for line in page.read_text(encoding="utf-8").split("\n") if NOT_RUN.match(line.strip())]
        # Every marker sits right before a python block: none is left stranded by an edit.
        assert len(markers) == sum(b.not_run is not None for b in blocks(page)), page.name
    assert runnable(REPO / "README.md") and runnable(REPO / "docs" / "serving.md")


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=lambda p: p.name)
def test_python_blocks_run(page: Path, tmp_path: Path) -> None:
    code = runnable(page)
    if re.search(r"^\s*(import torch|from tokpack\.torch import)", code, flags=re.M):
        pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")
    (tmp_path / "cache").mkdir()
    (tmp_path / "work").mkdir()
    # PYTHONPATH passes through, so a worktree's checkout is the one tested, not the installed one.
    env = {"TOKPACK_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path / "work",
                          env=env, timeout=600)
    assert done.returncode == 0, f"{page.name}:\n{done.stderr}"
    if page.name in PRINTS:
        assert re.search(PRINTS[page.name], done.stdout), done.stdout


def test_the_training_guide_trains_checkpoints_and_resumes() -> None:
    """What the serving guide's runnable example must keep showing (it runs above)."""
    code = runnable(REPO / "docs" / "serving.md")
    assert "make_batch_loader" in code and "load_state_dict" in code and "tokenizer_for" in code


# --- command lines ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def help_of(path: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """The subcommands and the flags ``tokpack PATH --help`` lists."""
    from typer.testing import CliRunner

    from tokpack.cli import app

    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=400)
    assert result.exit_code == 0, f"tokpack {' '.join(path)} --help: {result.output}"
    commands: set[str] = set()
    flags: set[str] = set()
    section = ""
    for line in result.output.split("\n"):
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
        elif section == "Commands" and (name := re.match(r"^  ([a-z][\w-]*)(\s|$)", line)):
            commands.add(name.group(1))
        elif section == "Options" and line.startswith("  -"):
            first_column = re.split(r"\s{2,}", line.strip())[0]
            flags.update(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)", first_column))
    return frozenset(commands), frozenset(flags)


SHELL_BREAK = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "&"}


def tokpack_calls(words: list[str]) -> list[list[str]]:
    """The argument lists of every ``tokpack`` call in one shell command line, including one in a
    quoted argument (``sbatch --wrap 'tokpack shard run data/'``)."""
    calls: list[list[str]] = []
    for i, word in enumerate(words):
        if word.startswith("tokpack "):
            calls += tokpack_calls(shlex.split(word))
        at_command = i == 0 or words[i - 1] in SHELL_BREAK | {"do", "then"} or words[i - 1].endswith(";")
        if word in ("tokpack", ".venv/bin/tokpack") and at_command:
            args = []
            for arg in words[i + 1:]:
                if arg in SHELL_BREAK:
                    break
                args.append(arg.rstrip(";"))
                if arg.endswith(";"):
                    break
            calls.append(args)
    return calls


def command_lines(page: Path) -> list[tuple[int, list[str]]]:
    """Each shell command of the page's bash/console blocks, as words, with its block's line."""
    found = []
    for block in blocks(page):
        if block.language not in ("bash", "console"):
            continue
        pending, heredoc = "", None
        for line in block.code.split("\n"):
            if heredoc is not None:
                heredoc = None if line.strip() == heredoc else heredoc
                continue
            line = line.removeprefix("$ ") if block.language == "console" else line
            pending += line + "\n"
            if pending.rstrip("\n").endswith("\\"):
                pending = pending.rstrip("\n")[:-1] + " "
                continue
            try:
                words = shlex.split(pending, comments=True)
            except ValueError:  # an open quote: the command goes on
                continue
            pending = ""
            if "<<" in " ".join(words):
                marker = re.search(r"<<-?'?(\w+)'?", line)
                heredoc = marker.group(1) if marker else None
            if words:
                found.append((block.line, words))
        assert not pending.strip(), f"{page.name}:{block.line}: an unfinished command line"
    return found


def test_every_tokpack_command_line_names_commands_and_flags_that_exist() -> None:
    checked = 0
    for page in PAGES:
        for line, words in command_lines(page):
            for args in tokpack_calls(words):
                where = f"{page.name}:{line}: tokpack {' '.join(args)}"
                path: list[str] = []
                commands, flags = help_of(())
                rest = list(args)
                while commands and rest:
                    word = rest.pop(0)
                    if word.startswith("-"):
                        assert word in flags, f"{where}: no option {word}"
                        continue
                    assert word in commands, f"{where}: no command {word!r} (have {sorted(commands)})"
                    path.append(word)
                    commands, flags = help_of(tuple(path))
                assert path or args[:1] in (["--version"], ["-h"], ["--help"]), f"{where}: no command"
                for word in rest:
                    flag = word.strip("[]").split("=", 1)[0]
                    if re.fullmatch(r"--?[A-Za-z][\w-]*", flag):
                        assert flag in flags, f"{where}: `tokpack {' '.join(path)}` has no option {flag}"
                checked += 1
    assert checked >= 40, checked  # the guides show the commands; a parser that finds none fails here


def test_a_wrong_command_line_is_caught() -> None:
    """The check above can fail: a made-up flag and a made-up command are both found."""
    _, flags = help_of(("prepare",))
    assert "--vocab" in flags and "--shards" in flags and "-o" in flags and "--no-such-flag" not in flags
    commands, _ = help_of(("chess",))
    assert {"convert", "tokenize"} <= commands and "pack" not in commands
    words = shlex.split("sbatch --array=0-7 --wrap 'tokpack shard run data/'; tokpack merge data/ merged/")
    assert tokpack_calls(words) == [["shard", "run", "data/"], ["merge", "data/", "merged/"]]


def test_the_command_lines_that_need_no_file_run() -> None:
    """`tokpack bpe explain TEXTS...` needs no input file: every such line of the guides runs."""
    from typer.testing import CliRunner

    from tokpack.cli import app

    ran = 0
    for page in PAGES:
        for _, words in command_lines(page):
            for args in tokpack_calls(words):
                if args[:2] == ["bpe", "explain"]:
                    result = CliRunner().invoke(app, args)
                    assert result.exit_code == 0, f"{page.name}: tokpack {' '.join(args)}: {result.output}"
                    assert "merge" in result.output.lower(), result.output
                    ran += 1
    assert ran >= 2  # the README's and the BPE guide's


# --- links -----------------------------------------------------------------------------------


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings (lower case, punctuation dropped, spaces to -)."""
    found: set[str] = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (heading := re.match(r"^#{1,6} (.*)$", line)):
            text = heading.group(1).strip().lower()
            slug = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
            slug = slug.replace(" ", "-")
            anchor, n = slug, 1
            while anchor in found:
                anchor, n = f"{slug}-{n}", n + 1
            found.add(anchor)
    return found


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", [*PAGES, BENCHMARKS], ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_heading(page: Path) -> None:
    for target in links(page):
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name}: {target}: no such file"
        assert REPO in file.parents or file == REPO, f"{page.name}: {target} leaves the repository"
        if anchor:
            assert file.suffix == ".md" and anchor in anchors(file), f"{page.name}: {target}: no such heading"


def test_the_link_check_knows_githubs_anchors(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Exact BPE (`tokpack.bpe`, `tokpack bpe`)\n## Sharded datasets, `job.json` and `encoder.json`\n"
                    "## Scale: parallel preparation\n## Scale: parallel preparation\n", encoding="utf-8")
    assert anchors(page) == {"exact-bpe-tokpackbpe-tokpack-bpe", "sharded-datasets-jobjson-and-encoderjson",
                             "scale-parallel-preparation", "scale-parallel-preparation-1"}


def test_the_guides_name_no_issue_numbers() -> None:
    for page in [*PAGES, BENCHMARKS]:
        found = re.search(r"\bissues? \d+", page.read_text(encoding="utf-8"), flags=re.I)
        assert found is None, f"{page.name}: {found.group(0) if found else ''}"



def test_the_guides_the_source_points_to_exist() -> None:
    """A message or docstring that sends the user to docs/NAME.md names a guide that exists."""
    named = set()
    for path in (REPO / "src" / "tokpack").rglob("*.py"):
        named |= set(re.findall(r"docs/[\w-]+\.md", path.read_text(encoding="utf-8")))
    assert "docs/chess.md" in named  # the chess config's message names its guide
    for name in named:
        assert (REPO / name).is_file(), name


def test_the_module_map_names_every_module_and_no_other() -> None:
    # docs/architecture.md's map is the long Layout: a module added, moved or removed shows here.
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    mapped = set(re.findall(r"^\| `([\w/]+\.py)` \|", text.split("## Module map", 1)[1], flags=re.M))
    source = REPO / "src" / "tokpack"
    modules = {path.relative_to(source).as_posix() for path in source.rglob("*.py")}
    assert not modules - mapped, f"docs/architecture.md's module map lacks {sorted(modules - mapped)}"
    assert not mapped - modules, f"docs/architecture.md's module map names modules that are gone: {sorted(mapped - modules)}"


def _resolves(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                value = getattr(value, name)
        except AttributeError:
            return False
        return True
    return False


def _is_schema_tag(name: str) -> bool:
    """A JSON file's ``schema`` value (``tokpack.job.v1``): a name, not a module."""
    return re.search(r"\.v\d+$", name) is not None


def test_every_python_name_the_pages_mention_exists() -> None:
    # Names quoted in the text (`tokpack.serve.batch_ramp(...)`), not only the code blocks that run.
    missing = sorted({f"{page.name}: {name}" for page in PAGES
                      for name in re.findall(r"`(tokpack(?:\.[A-Za-z_]\w*)+)(?![\w-])", page.read_text(encoding="utf-8"))
                      if not _resolves(name) and not _is_schema_tag(name)})
    assert not missing, f"these names do not import: {missing}"
