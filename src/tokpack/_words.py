"""How messages and summaries count things: a number with its noun, singular for one.

>>> counted(1, "document"), counted(12_345, "shard"), counted(0, "input unit")
('1 document', '12,345 shards', '0 input units')
"""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``number`` (thousands grouped) and ``noun``, or ``plural`` (``noun + "s"`` unless given)
    for any number but one."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


__all__ = ["counted"]
