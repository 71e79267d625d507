"""The real text the BPE tests train on (``data/`` in the repository)."""

from __future__ import annotations

from conftest import DATA


def real_texts(folder: str, limit_bytes: int) -> list[str]:
    """Whole files of ``DATA/folder`` in path order until ``limit_bytes`` of UTF-8 are reached."""
    root = DATA / folder
    texts, size = [], 0
    for path in sorted(root.rglob("*.txt")):
        text = path.read_text(encoding="utf-8")
        texts.append(text)
        size += len(text.encode("utf-8"))
        if size >= limit_bytes:
            break
    return texts


def test_real_texts_stop_at_the_limit_on_a_file_boundary() -> None:
    texts = real_texts("polish", 50_000)
    sizes = [len(text.encode("utf-8")) for text in texts]
    assert sum(sizes) >= 50_000 and sum(sizes[:-1]) < 50_000
