"""Text that spells ``<|endoftext|>`` often enough that a trainer learning it as text would make
it a token: English dialogue lines, one a document, joined by the spelling on a line of its own."""

from __future__ import annotations

from pathlib import Path

from conftest import DATA

EOT = "<|endoftext|>"
#: Every piece of the pattern a run of non-space characters or of spaces: the spelling is one piece.
SPACES_PATTERN = r"\S+|\s+"


def spelled_text(size: int = 300_000) -> str:
    """``size`` characters of dialogue lines joined by ``\\n<|endoftext|>\\n`` (thousands of times)."""
    lines = (DATA / "other" / "english" / "wesnoth-dialogue-en.txt").read_text(encoding="utf-8").splitlines()
    return f"\n{EOT}\n".join(line for line in lines if line.strip())[:size]


def spelled_corpus(path: Path, size: int = 300_000) -> Path:
    """:func:`spelled_text` written to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(spelled_text(size), encoding="utf-8")
    return path


def learned_ranks() -> dict[bytes, int]:
    """Ranks whose merges made ``<|endoftext|>`` from text: the rules with nothing cut, as a
    user's own trainer may have learned them."""
    from tokpack.bpe import train_fast

    ranks = train_fast([spelled_text(100_000)], 44, pattern=SPACES_PATTERN).ranks()
    assert EOT.encode() in ranks
    return ranks


def rank_file(ranks: dict[bytes, int], path: Path) -> Path:
    """``ranks`` as a tiktoken rank file at ``path`` (nothing beside it)."""
    import base64

    path.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n"
                            for token, rank in sorted(ranks.items(), key=lambda item: item[1])), encoding="utf-8")
    return path
