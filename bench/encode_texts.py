"""The encoder benchmark's texts: about 2 MB of each kind, none of it this repository's, assembled
reproducibly from named, pinned sources (fetched with pip or read from Debian's installed files).

    PYTHONPATH=src .venv/bin/python bench/encode_texts.py   # assemble (cached) and list them

Each kind is a list of documents (a source file or a message catalogue is one document), taken in
sorted order until the kind holds :data:`TARGET` bytes of UTF-8 (the last document cut at a line).
The assembled texts go to ``.cache/bench/encode-texts/`` (not committed: they are third-party);
the downloads to ``.cache/bench/downloads/``.

| kind | source | licence |
|---|---|---|
| english | Vim's help files, ``/usr/share/vim/vim90/doc/*.txt`` (Debian ``vim-runtime``; the user manual ``usr_*.txt`` first) | Vim licence (GPL-compatible charityware) |
| python | statsmodels 0.14.4's own ``.py`` sources (PyPI wheel) | BSD-3-Clause |
| c | zstandard 0.23.0's sdist, its ``.c`` files: the extension's, then the bundled zstd library (one amalgamated file) (PyPI) | BSD-3-Clause (zstd: BSD or GPLv2) |
| json | botocore 1.43.117's ``data/*/*/service-2.json.gz`` (pinned in the test extra; decompressed) | Apache-2.0 |
| minified_js | plotly 5.24.1's ``package_data/plotly.min.js`` (PyPI wheel; one document) | MIT |
| csv | statsmodels 0.14.4's ``.csv`` files: its data sets, then its tests' tables of results (PyPI wheel) | BSD-3-Clause (the data sets are public) |
| polish | the Polish translations (``msgstr``) of Debian's message catalogues, ``/usr/share/locale/pl/LC_MESSAGES/*.mo`` (coreutils, git, bash, glibc, dpkg, ...: one document per catalogue) | each package's: GPL-2+/GPL-3+/LGPL |
| cjk | the same for Simplified Chinese (``zh_CN``) then Japanese (``ja``), half each | the same |
"""

from __future__ import annotations

import gettext
import gzip
import importlib.util
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "bench"
#: Bytes of UTF-8 per kind.
TARGET = 2_000_000
KINDS = ("english", "python", "c", "json", "minified_js", "csv", "polish", "cjk")
_WHEELS = {"statsmodels": "statsmodels==0.14.4", "plotly": "plotly==5.24.1"}
_SDISTS = {"zstandard": "zstandard==0.23.0"}


def _download(requirement: str, *, source: bool) -> Path:
    """The wheel (or sdist) of ``requirement`` in the downloads folder, fetched by pip if missing."""
    folder = CACHE / "downloads"
    name, version = requirement.split("==")
    found = sorted(folder.glob(f"{name}-{version}*"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(folder), requirement]
    command += ["--no-binary", name] if source else ["--only-binary", ":all:"]
    subprocess.run(command, check=True)
    return sorted(folder.glob(f"{name}-{version}*"))[0]


def _wheel_files(requirement: str, suffix: str, under: str, first: str = "") -> Iterator[str]:
    """The files of a wheel under ``under`` ending in ``suffix``, those under ``first`` first."""
    with zipfile.ZipFile(_download(requirement, source=False)) as wheel:
        for name in sorted(wheel.namelist(), key=lambda name: (not name.startswith(first), name)):
            if name.startswith(under) and name.endswith(suffix):
                yield wheel.read(name).decode("utf-8")


def _sdist_files(requirement: str, suffix: str, under: str) -> Iterator[str]:
    with tarfile.open(_download(requirement, source=True)) as sdist:
        for member in sorted(sdist.getmembers(), key=lambda m: m.name):
            relative = member.name.split("/", 1)[-1]
            if member.isfile() and relative.startswith(under) and relative.endswith(suffix):
                handle = sdist.extractfile(member)
                assert handle is not None
                yield handle.read().decode("utf-8")


def _vim_help() -> Iterator[str]:
    folder = Path("/usr/share/vim/vim90/doc")
    if not folder.is_dir():
        raise SystemExit(f"{folder} is missing: install Debian's vim-runtime (apt-get install vim-runtime)")
    paths = sorted(folder.glob("*.txt"), key=lambda p: (not p.name.startswith("usr_"), p.name))
    for path in paths:
        yield path.read_text(encoding="utf-8", errors="strict")


def _botocore_models() -> Iterator[str]:
    spec = importlib.util.find_spec("botocore")
    if spec is None or spec.origin is None:
        raise SystemExit("botocore is missing: it comes with the test extra (./dev test installs it)")
    for path in sorted((Path(spec.origin).parent / "data").glob("*/*/service-2.json.gz")):
        yield gzip.decompress(path.read_bytes()).decode("utf-8")


def _catalogue_messages(language: str) -> Iterator[str]:
    """The translations in each of Debian's message catalogues for ``language``, one document per
    catalogue (its messages joined by newlines, in the catalogue's order)."""
    paths = sorted(Path(f"/usr/share/locale/{language}/LC_MESSAGES").glob("*.mo"))
    if not paths:
        raise SystemExit(f"no message catalogues for {language} under /usr/share/locale")
    for path in paths:
        with path.open("rb") as handle:
            catalogue = gettext.GNUTranslations(handle)
        messages = [text for key, text in catalogue._catalog.items()  # noqa: SLF001 - the one way to list them
                    if key and isinstance(text, str) and text]
        yield "\n".join(messages)


def _take(documents: Iterable[str], target: int) -> list[str]:
    """Documents until ``target`` bytes of UTF-8; the last one cut at a line end."""
    taken: list[str] = []
    size = 0
    for document in documents:
        if not document:
            continue
        encoded = document.encode("utf-8")
        if size + len(encoded) > target:
            cut = encoded[:target - size]
            line_end = cut.rfind(b"\n") + 1
            cut = cut[:line_end] if line_end > 0.9 * len(cut) else cut  # (a minified file is one long line)
            taken.append(cut.decode("utf-8", errors="ignore"))
            break
        taken.append(document)
        size += len(encoded)
    return taken


def _assemble(kind: str) -> list[str]:
    if kind == "english":
        return _take(_vim_help(), TARGET)
    if kind == "python":
        return _take(_wheel_files(_WHEELS["statsmodels"], ".py", "statsmodels/"), TARGET)
    if kind == "c":
        return _take(_sdist_files(_SDISTS["zstandard"], ".c", ""), TARGET)
    if kind == "json":
        return _take(_botocore_models(), TARGET)
    if kind == "minified_js":
        return _take(_wheel_files(_WHEELS["plotly"], "plotly.min.js", "plotly/package_data/"), TARGET)
    if kind == "csv":
        return _take(_wheel_files(_WHEELS["statsmodels"], ".csv", "statsmodels/", "statsmodels/datasets/"), TARGET)
    if kind == "polish":
        return _take(_catalogue_messages("pl"), TARGET)
    if kind == "cjk":
        return _take(_catalogue_messages("zh_CN"), TARGET // 2) + _take(_catalogue_messages("ja"), TARGET // 2)
    raise ValueError(kind)


_SEPARATOR = "\x00\n"  # between documents in the cached file (no source text holds a NUL)


def texts(kinds: Iterable[str] = KINDS) -> dict[str, list[str]]:
    """Each kind's documents, assembled once and cached."""
    folder = CACHE / "encode-texts"
    found: dict[str, list[str]] = {}
    for kind in kinds:
        path = folder / f"{kind}.txt"
        if not path.exists():
            documents = _assemble(kind)
            folder.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            partial.write_bytes(_SEPARATOR.join(documents).encode("utf-8"))
            partial.replace(path)
        found[kind] = path.read_bytes().decode("utf-8").split(_SEPARATOR)
    return found


def main() -> None:
    for kind, documents in texts().items():
        size = sum(len(d.encode("utf-8")) for d in documents)
        ascii_share = sum(len(d) for d in documents if d.isascii()) / max(1, sum(len(d) for d in documents))
        print(f"{kind:12} {len(documents):6,} documents {size / 1e6:5.2f} MB  ascii documents: {ascii_share:.0%}")


if __name__ == "__main__":
    main()
