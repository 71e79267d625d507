"""Two corpora of real text nobody in this project wrote, assembled from this machine's files.

    PYTHONPATH=src .venv/bin/python bench/machine_corpora.py [--megabytes 250]

- ``system``: the machine's documentation in many languages, of very uneven lengths: man pages
  (``/usr/share/man``, every language; troff source, decompressed), message catalogs
  (``/usr/share/locale/*/LC_MESSAGES/*.mo``: one document a catalog, its translated strings, read
  with :mod:`gettext`), and ``/usr/share/doc`` (README, changelogs, copyright files, Markdown;
  decompressed).
- ``code``: Python sources and their documentation as installed in this checkout's ``.venv``
  (``*.py``, ``*.pyi``, ``*.md``, ``*.rst``, ``*.txt``; tokpack's own excluded) and C headers
  (``/usr/include``).
- ``both``: the candidates of both (``--megabytes 1200`` takes them all, about a gigabyte).

Each is a folder of one file per document, under ``.cache/bench/machine/``. Candidate files are
listed in sorted path order; a file that is not UTF-8 text (or is empty) is left out; when the
list holds more than ``--megabytes``, every k-th file is taken (k the smallest that fits), so the
corpus keeps the mix of every source. ``listing.json`` beside each folder names every file taken,
its source and size, and the listing's SHA-256, so a run on another machine says how its corpus
differs.
"""

from __future__ import annotations

import argparse
import bz2
import gettext
import gzip
import hashlib
import json
import lzma
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MACHINE = REPO / ".cache" / "bench" / "machine"

#: Reading a source file as text: its bytes, decompressed where the name says so.
_OPENERS: dict[str, Callable[[Path], bytes]] = {
    ".gz": lambda path: gzip.decompress(path.read_bytes()),
    ".bz2": lambda path: bz2.decompress(path.read_bytes()),
    ".xz": lambda path: lzma.decompress(path.read_bytes()),
}


def _plain(path: Path) -> bytes:
    return _OPENERS.get(path.suffix, Path.read_bytes)(path)


def _catalog(path: Path) -> bytes:
    """A message catalog's translated strings, one a line (the header entry left out)."""
    with open(path, "rb") as handle:
        catalog = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
    texts = [text for key, text in catalog.items() if key != "" and isinstance(text, str) and text]
    return "\n".join(texts).encode("utf-8")


def _files(root: Path, suffixes: tuple[str, ...] | None = None, *, skip: tuple[str, ...] = ()) -> Iterator[Path]:
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file() or any(part in skip for part in path.parts):
            continue
        if suffixes is None or path.name.endswith(suffixes):
            yield path


def _site_packages() -> list[Path]:
    return sorted((REPO / ".venv" / "lib").glob("python3*/site-packages"))


def sources(name: str) -> Iterator[tuple[str, Path, Callable[[Path], bytes]]]:
    """``(source, path, reader)`` of every candidate file of corpus ``name``, in a fixed order."""
    if name == "system":
        for path in _files(Path("/usr/share/man")):
            yield "man", path, _plain
        for path in _files(Path("/usr/share/locale"), (".mo",)):
            yield "catalog", path, _catalog
        text_suffixes = (".gz", ".txt", ".md", ".rst", "copyright", "README", "NEWS", "changelog", "TODO", ".html")
        for path in _files(Path("/usr/share/doc"), text_suffixes):
            yield "doc", path, _plain
    elif name == "code":
        for packages in _site_packages():
            for path in _files(packages, (".py", ".pyi", ".md", ".rst", ".txt"), skip=("tokpack",)):
                yield "python", path, _plain
        for path in _files(Path("/usr/include"), (".h", ".hpp", ".hh")):
            yield "headers", path, _plain
    elif name == "both":
        yield from sources("system")
        yield from sources("code")
    else:
        raise SystemExit(f"no corpus {name!r}: system, code or both")


def assemble(name: str, megabytes: float) -> Path:
    """Write corpus ``name`` (see the module's docstring) once; return its folder."""
    folder = MACHINE / name
    if folder.is_dir():
        return folder
    candidates: list[tuple[str, Path, bytes]] = []
    for source, path, read in sources(name):
        try:
            data = read(path)
            data.decode("utf-8")
        except (OSError, ValueError, EOFError, LookupError, lzma.LZMAError):  # not text, a damaged archive or catalog
            continue
        if data.strip():
            candidates.append((source, path, data))
    total = sum(len(data) for _, _, data in candidates)
    step = max(1, -(-total // int(megabytes * 1e6)))  # every k-th file: the smallest k that fits
    while step > 1 and sum(len(data) for _, _, data in candidates[:: step - 1]) <= megabytes * 1e6:
        step -= 1
    chosen = candidates[::step]
    building = MACHINE / f".{name}.partial"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    listing = []
    for number, (source, path, data) in enumerate(chosen):
        target = building / f"{number:06d}-{source}-{path.name.removesuffix('.gz')}.txt"
        target.write_bytes(data)
        listing.append({"file": target.name, "source": source, "from": str(path), "bytes": len(data)})
    digest = hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()
    (MACHINE / f"{name}.listing.json").write_text(json.dumps({"sha256": digest, "every": step, "files": listing}, indent=1))
    building.rename(folder)
    return folder


def describe(name: str) -> str:
    """One line: the corpus's files, bytes, sources and listing hash."""
    record = json.loads((MACHINE / f"{name}.listing.json").read_text())
    files = record["files"]
    by_source: dict[str, int] = {}
    for entry in files:
        by_source[entry["source"]] = by_source.get(entry["source"], 0) + entry["bytes"]
    sizes = sorted(entry["bytes"] for entry in files)
    mix = ", ".join(f"{source} {size / 1e6:.1f} MB" for source, size in by_source.items())
    return (f"{name}: {len(files):,} files, {sum(sizes) / 1e6:.1f} MB ({mix}); file sizes median {sizes[len(sizes) // 2]:,} B, "
            f"largest {sizes[-1]:,} B; every {record['every']} candidate file; listing sha256 {record['sha256'][:12]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=float, default=250.0, help="the most each corpus holds")
    parser.add_argument("--corpora", nargs="+", default=["system", "code"])
    args = parser.parse_args()
    for name in args.corpora:
        assemble(name, args.megabytes)
        print(describe(name))


if __name__ == "__main__":
    main()
