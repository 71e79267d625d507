"""The real data ships with the repository: a clone needs nothing beside it, and every source
carries its licence."""

from __future__ import annotations

import re
import subprocess

from conftest import DATA, REPO

#: What a clone may weigh at most (the issue's "about 40 MB"), counting every tracked file.
MAX_REPOSITORY_BYTES = 40_000_000


def test_every_data_folder_is_inside_the_repository_and_described_with_its_licence() -> None:
    assert DATA.is_relative_to(REPO)
    sources = (DATA / "SOURCES.md").read_text(encoding="utf-8")
    for folder in ("polish", "other", "chess"):
        assert f"## {folder}/" in sources, folder
        assert any((DATA / folder).rglob("*.*")), folder
    for domain in ("narrative", "dialogue", "technical", "numbers", "code"):
        assert len(list((DATA / "polish" / domain).glob("*.txt"))) > 10, domain
    for licence in ("GPL-2", "GPL-3", "LGPL-2.1", "MPL-2.0", "MIT"):
        assert (DATA / "licences" / f"{licence}.txt").stat().st_size > 1000, licence
    assert (DATA / "chess" / "games.parquet").stat().st_size > 1_000_000


def test_tests_and_benchmarks_never_look_beside_the_repository() -> None:
    beside = re.compile(r"""\.\./shared|parent\s*/\s*["']shared["']""")
    for folder in ("tests", "bench", "docs", "src"):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert not beside.search(text), path
            # Path(__file__).parents[k] past the repository's root is the folder beside it.
            deepest = len(path.relative_to(REPO).parts) - 1  # parents[deepest] is the root
            assert all(int(k) <= deepest for k in re.findall(r"__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]", text)), path
    beside_data = "/".join(("shared", "data"))  # the folder beside the repository the data came from
    assert beside_data not in (REPO / "README.md").read_text(encoding="utf-8")


def test_the_repository_stays_small_enough_to_clone() -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    size = sum((REPO / name).stat().st_size for name in listed.decode().split("\0") if name and (REPO / name).is_file())
    assert size < MAX_REPOSITORY_BYTES, f"{size / 1e6:.1f} MB tracked"
