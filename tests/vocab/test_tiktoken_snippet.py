"""The "In tiktoken" snippet of docs/formats.md gives tokpack's ids even when tiktoken's path
cache holds a stale entry for the same relative path (from an earlier, different pack)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from tokpack.cli import app

from conftest import DATA, REPO

FORMATS = REPO / "docs" / "formats.md"


def test_the_tiktoken_snippet_ignores_a_stale_tiktoken_cache_entry_for_the_same_path(tmp_path: Path) -> None:
    text = FORMATS.read_text(encoding="utf-8").split("## The pack format\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    sample = (DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt").read_bytes()[:60_000]
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(sample[: sample.rindex(b"\n") + 1])
    made = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab-size", "300", "-o", str(tmp_path / "pack"),
                                    "--cache-dir", str(tmp_path / "c"), "--json"])
    assert made.exit_code == 0, made.output
    # An earlier pack's ranks cached by tiktoken under the same path: here this pack's tokens with
    # the single bytes' ranks rotated, so every id it would give differs.
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    lines = (tmp_path / "pack" / "vocabulary" / "ranks.tiktoken").read_bytes().split()
    pairs = [(lines[i], int(lines[i + 1])) for i in range(0, len(lines), 2)]
    stale = [(token, (rank + 1) % 256 if rank < 256 else rank) for token, rank in pairs]
    assert all(len(base64.b64decode(token)) == 1 for token, rank in pairs if rank < 256)
    for path in ("pack/vocabulary/ranks.tiktoken", str(Path("pack/vocabulary") / "ranks.tiktoken")):
        (cache / hashlib.sha1(path.encode()).hexdigest()).write_bytes(
            b"".join(token + b" " + str(rank).encode() + b"\n" for token, rank in stale))
    check = ("\nfrom tokpack.store import Pack\n"
             "assert encoding.encode_ordinary(open('c.txt', encoding='utf-8').read()) == Pack(Path('pack')).tokens.tolist(), "
             "'ids differ from the pack'\nprint('ok')\n")
    done = subprocess.run([sys.executable, "-c", code + check], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "TOKPACK_CACHE": str(tmp_path / "c")})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert json.loads(made.stdout)["n_tokens"] > 100


def test_the_readme_loads_a_pack_vocabulary_in_tiktoken(tmp_path: Path) -> None:
    text = FORMATS.read_text(encoding="utf-8").split("## The pack format\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert "ranks.tiktoken" in code and 'Path("pack/vocabulary")' in code
    sample = (DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt").read_bytes()[:60_000]
    (tmp_path / "a").mkdir()
    corpus = tmp_path / "a" / "c.txt"
    corpus.write_bytes(sample[: sample.rindex(b"\n") + 1])
    made = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab-size", "300", "-o", str(tmp_path / "pack"),
                                    "--cache-dir", str(tmp_path / "c")])
    assert made.exit_code == 0, made.output
    check = ("\nimport numpy\nfrom tokpack.store import Pack\npack = Pack(Path('pack'))\n"
             "sample = open('a/c.txt', encoding='utf-8').read()\n"
             "assert encoding.encode_ordinary(sample) == pack.tokens.tolist(), 'ids differ'\n"
             "assert len(ids) > 3\nprint('ok')\n")
    done = subprocess.run([sys.executable, "-c", code + check], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "TOKPACK_CACHE": str(tmp_path / "c")}, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
