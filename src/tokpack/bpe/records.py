"""The JSON records of exact BPE: trace rows, challenges and proofs.

``challenge.json`` and ``proof.json`` are an interchange format fixed outside tokpack (a grader
reads them), so they carry exactly the fields that format names and no ``schema`` field.
A challenge keeps any extra field it arrives with (an expiry date, a hint), because the
proof is only valid for the challenge as issued.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from pydantic import ConfigDict, Field

from tokpack._schema import Record
from tokpack.errors import InputError

#: The extra fields a challenge may carry its expiry in, first found wins.
_EXPIRY_FIELDS = ("expires_at", "expires", "valid_until", "expiry")


class TraceRow(Record):
    """One merge: ``(left_id, right_id)`` became ``result_id``; ``frequency`` is the pair's count
    just before the replacement (overlapping occurrences included)."""

    # Strict: a grader compares numbers, so "5" (a string) or 5.0 is a malformed proof, not 5.
    left_id: int = Field(ge=0, strict=True)
    right_id: int = Field(ge=0, strict=True)
    result_id: int = Field(ge=256, strict=True)
    frequency: int = Field(ge=1, strict=True)


def corpus_sha256(corpus: list[str]) -> str:
    """The checksum a challenge records: SHA-256 of the corpus as compact, non-ASCII-escaped JSON.

    >>> corpus_sha256(["abab", "żółć"])[:16]
    '29c9c83a31bb8ac8'
    """
    serialized = json.dumps(corpus, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(serialized.encode("utf-8")).hexdigest()


class Challenge(Record):
    """``challenge.json``: a corpus, a merge count and the corpus checksum; extra fields are kept.

    An expiry (``expires_at``, ``expires``, ``valid_until`` or ``expiry``), when present, is an
    ISO-8601 date or datetime from which on the challenge is refused.
    """

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True, strict=True)

    challenge_id: str = Field(min_length=1)
    corpus: list[str]
    num_merges: int = Field(ge=0, strict=True)
    corpus_sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")

    @property
    def extra_fields(self) -> dict[str, Any]:
        """The fields beyond the four the format requires, as they arrived."""
        return dict(self.model_extra or {})

    def expiry(self) -> datetime | None:
        """The moment the challenge stops being valid, if it carries an expiry (UTC-aware).

        A date without a time is valid through that whole day; a time without a zone is UTC.

        >>> Challenge(challenge_id="c", corpus=[], num_merges=0, corpus_sha256="0" * 64,
        ...           expires_at="2026-03-01").expiry().isoformat()
        '2026-03-02T00:00:00+00:00'

        Raises:
            InputError: an expiry field that is not an ISO-8601 date or datetime.
        """
        for key in _EXPIRY_FIELDS:
            value = self.extra_fields.get(key)
            if value is None:
                continue
            text = str(value).strip()
            try:
                if len(text) == 10:  # YYYY-MM-DD
                    return datetime.combine(date.fromisoformat(text) + timedelta(days=1), time(0), timezone.utc)
                moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                raise InputError(f"{value!r} is not an ISO-8601 date", where=key) from None
            return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
        return None


class Proof(Record):
    """``proof.json``: the trace of ``num_merges`` merges on a challenge's corpus."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    challenge_id: str = Field(min_length=1)
    corpus_sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")
    num_merges: int = Field(ge=0, strict=True)
    merges: list[TraceRow]
    implementation: str
