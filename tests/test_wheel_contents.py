"""What ``pip install tokpack`` carries, and that the docs say so: the package with its bundled
sample, chess script and report pages; not the repository's ``examples/``, ``artifacts/``,
``data/`` or ``bench/``, which the docs call a clone's. The source distribution carries every
file the compiled encoder is built from."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(REPO)],
                   check=True, capture_output=True)
    (wheel,) = out.glob("tokpack-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_carries_the_package_not_the_clone_s_folders(wheel_names: set[str]) -> None:
    assert {"tokpack/sample/polish.txt", "tokpack/sample/manifest.json", "tokpack/chess/web/tokpack-chess.js",
            "tokpack/vocab/published_joins/cl100k_base.joins", "tokpack/vocab/published_joins/o200k_base.joins"} <= wheel_names
    for folder in ("examples/", "artifacts/", "data/", "bench/"):
        assert not any(name.startswith(folder) or f"/{folder}" in name for name in wheel_names), folder


def test_the_docs_say_which_files_come_with_a_clone_only() -> None:
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert ("The repository's `examples/`, `artifacts/` (the Polish tokenizer), `data/` and `bench/` come with a clone "
            "only: `pip install tokpack` carries the package (and its bundled sample), not them.") in readme
    polish = " ".join((REPO / "docs" / "polish-tokenizer.md").read_text(encoding="utf-8").split())
    assert "tokpack ships `artifacts" not in polish
    assert "The repository holds `artifacts/polish-8192/` (in a clone: `pip install tokpack` does not carry it)" in polish
    serving = " ".join((REPO / "docs" / "serving.md").read_text(encoding="utf-8").split())
    assert "`pip install tokpack` does not carry `examples/`" in serving


def test_the_source_distribution_carries_every_file_of_the_compiled_encoder(tmp_path: Path) -> None:
    build = "import sys\nfrom setuptools import build_meta\nprint(build_meta.build_sdist(sys.argv[1]))"
    name = subprocess.run([sys.executable, "-c", build, str(tmp_path)], cwd=REPO, check=True, capture_output=True,
                          text=True).stdout.split()[-1]
    with tarfile.open(tmp_path / name) as archive:
        carried = {member.split("/", 1)[1] for member in archive.getnames() if "/" in member}
    sources = {path.relative_to(REPO).as_posix() for path in (REPO / "src" / "tokpack" / "vocab").glob("_bpe*.[ch]")}
    assert {"src/tokpack/vocab/_bpe.c", "src/tokpack/vocab/_bpe_classes.h"} < sources
    assert sources <= carried, sorted(sources - carried)
