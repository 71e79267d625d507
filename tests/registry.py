"""Files that tests and benchmarks take from a package registry once, then keep in ``.cache/``."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "tests"


def gpt2_rank_file() -> Path:
    """GPT-2's ranks as a tiktoken file, from the ``openai-whisper`` sdist on PyPI.

    Raises:
        RuntimeError: no registry could be reached (the message says what pip said).
    """
    target = CACHE / "gpt2.tiktoken"
    if target.exists():
        return target
    download = CACHE / "whisper-sdist"
    download.mkdir(parents=True, exist_ok=True)
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
         "-d", str(download), "openai-whisper"],
        capture_output=True, text=True, timeout=300,
    )
    archives = sorted(download.glob("openai[-_]whisper-*.tar.gz"))
    if not archives:
        raise RuntimeError(f"could not fetch openai-whisper from a registry: {fetched.stderr.strip()[-200:]}")
    with tarfile.open(archives[-1]) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("whisper/assets/gpt2.tiktoken"))
        source = archive.extractfile(member)
        assert source is not None
        partial = target.with_suffix(".partial")
        partial.write_bytes(source.read())
        partial.rename(target)
    return target
