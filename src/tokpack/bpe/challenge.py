"""Challenges and proofs: train on a fixed corpus, record every merge, and check the record.

A *challenge* fixes a corpus (each string one document, no pre-tokenization), a number of merges
and the corpus checksum. A *proof* is the trace the fast trainer produced for it. Verifying a
proof recomputes the trace with the fast trainer (tested trace for trace against the reference)
and finds the first row that differs: every later row may only be a consequence of that one, so
it is the one worth reading. That row is then explained with the reference functions: the
sequences as they stood at that step, each pair's actual count, and where each pair occurs.
Both commands refuse a challenge beyond :class:`Limits`, so a grading server is never held up.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from tokpack._atomic import write_atomically
from tokpack._schema import read_record
from tokpack.bpe.explain import walk
from tokpack.bpe.fast import train_fast
from tokpack.bpe.records import Challenge, Proof, TraceRow, corpus_sha256
from tokpack.bpe.reference import Pair, count_pairs
from tokpack.errors import InputError

#: Default bounds of a challenge: a grading server answers within seconds at these sizes.
MAX_CORPUS_BYTES = 16 * 2**20
MAX_MERGES = 50_000
#: Above this many corpus-bytes times steps, the reference walk that explains a divergence would
#: take more than about a minute (it recounts the whole corpus every step): only the two rows
#: are reported then.
EXPLAIN_BUDGET = 512 * 2**20


class ChallengeRefused(InputError):
    """The challenge cannot be used: its corpus does not match its checksum, it has expired, or
    it is larger than the limits."""


@dataclass(frozen=True)
class Limits:
    """The largest challenge ``proof`` and ``verify`` accept (UTF-8 bytes of the corpus, merges)."""

    max_corpus_bytes: int = MAX_CORPUS_BYTES
    max_merges: int = MAX_MERGES


def check_limits(challenge: Challenge, limits: Limits) -> None:
    """Refuse a challenge larger than ``limits``.

    Raises:
        ChallengeRefused: the corpus or the merge count is over its limit.
    """
    size = sum(len(text.encode("utf-8")) for text in challenge.corpus)
    if size > limits.max_corpus_bytes:
        raise ChallengeRefused(f"corpus of {size:,} bytes is over the limit of {limits.max_corpus_bytes:,}",
                               fix="raise max_corpus_bytes if this is intended")
    if challenge.num_merges > limits.max_merges:
        raise ChallengeRefused(f"num_merges {challenge.num_merges:,} is over the limit of {limits.max_merges:,}",
                               fix="raise max_merges if this is intended")


def new_challenge(corpus: Sequence[str], num_merges: int, *, challenge_id: str, **extra: Any) -> Challenge:
    """A challenge for ``corpus`` with its checksum filled in; ``extra`` fields are kept as given.

    >>> challenge = new_challenge(["abab", "aaaa"], 2, challenge_id="demo", expires_at="2030-01-01")
    >>> challenge.corpus_sha256 == corpus_sha256(["abab", "aaaa"]), challenge.extra_fields
    (True, {'expires_at': '2030-01-01'})
    """
    return Challenge(
        challenge_id=challenge_id,
        corpus=list(corpus),
        num_merges=num_merges,
        corpus_sha256=corpus_sha256(list(corpus)),
        **extra,
    )


def read_json_record(model: type[Challenge | Proof], path: Path) -> Any:
    """Read ``path`` as ``model`` (see :func:`tokpack._schema.read_record`).

    Raises:
        InputError: a missing or unreadable file, invalid JSON (with its byte offset) or a field
            that does not match the format; the message names the file.
    """
    return read_record(model, Path(path))


def check_challenge(challenge: Challenge, *, now: datetime | None = None, ignore_expiry: bool = False) -> None:
    """Refuse a challenge whose corpus was changed or whose expiry (see :meth:`Challenge.expiry`) has passed.

    Raises:
        ChallengeRefused: the checksum names a different corpus, or the challenge has expired.
        InputError: the expiry field is not an ISO-8601 date.
    """
    actual = corpus_sha256(challenge.corpus)
    if actual != challenge.corpus_sha256.lower():
        raise ChallengeRefused(
            f"corpus_sha256 mismatch: the challenge records {challenge.corpus_sha256}, its corpus hashes to {actual}"
        )
    expiry = challenge.expiry()
    if expiry is not None and not ignore_expiry and (now or datetime.now(timezone.utc)) >= expiry:
        raise ChallengeRefused(f"challenge {challenge.challenge_id} expired {_expired_when(expiry)}",
                               fix="an old proof is checked against it with ignore_expiry=True")


def _expired_when(expiry: datetime) -> str:
    """When the challenge expired, in words: a date-only expiry is valid through that whole day,
    so its moment is the next midnight (UTC), said as the end of the day it names."""
    if expiry.utcoffset() == timedelta(0) and expiry.time() == time(0):
        return f"at the end of {(expiry - timedelta(days=1)).date().isoformat()} (UTC)"
    return f"at {expiry.isoformat()}"


def implementation_name() -> str:
    """What a proof records as its producer: tokpack's version and the trainer."""
    try:
        release = version("tokpack")
    except PackageNotFoundError:
        release = "unknown"
    return f"tokpack {release} (tokpack.bpe.fast.train_fast)"


def make_proof(challenge: Challenge, *, now: datetime | None = None, limits: Limits = Limits()) -> Proof:
    """Train the fast trainer on the challenge's corpus and return the proof.

    Raises:
        ChallengeRefused: as :func:`check_challenge` and :func:`check_limits`.
    """
    check_challenge(challenge, now=now)
    check_limits(challenge, limits)
    training = train_fast(challenge.corpus, challenge.num_merges, workers=1)
    return Proof(
        challenge_id=challenge.challenge_id,
        corpus_sha256=challenge.corpus_sha256.lower(),
        num_merges=challenge.num_merges,
        merges=training.trace,
        implementation=implementation_name(),
    )


def write_proof(proof: Proof, path: Path) -> None:
    """Write ``proof`` to ``path`` through a temporary sibling, so no half-written file appears."""
    path = Path(path)
    if not path.parent.is_dir():  # a mistyped folder is the user's mistake, not a folder to create
        raise InputError("its folder does not exist", where=str(path), fix="create the folder or name another file")
    write_atomically(path, proof.to_json())


@dataclass(frozen=True)
class Excerpt:
    """Where a pair occurs at the divergent step: document, position and the ids around it."""

    document: int
    position: int
    before: list[int]
    pair: list[int]
    after: list[int]


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`verify_proof`.

    ``valid`` proofs have no ``step``. Otherwise ``step`` is the 1-based number of the first
    row that differs (``None`` when the proof's header does not match the challenge), with the
    reference row and the proof's row (either may be ``None`` when one trace is longer), the
    merges both agree on before it, the count of each row's pair at that step, and excerpts of
    the sequences where each pair occurs.
    """

    valid: bool
    problem: str = ""
    step: int | None = None
    agreed: list[Pair] = field(default_factory=list)
    expected: TraceRow | None = None
    claimed: TraceRow | None = None
    expected_count: int | None = None
    claimed_count: int | None = None
    expected_excerpts: list[Excerpt] = field(default_factory=list)
    claimed_excerpts: list[Excerpt] = field(default_factory=list)


def verify_proof(
    proof: Proof,
    challenge: Challenge,
    *,
    now: datetime | None = None,
    ignore_expiry: bool = False,
    excerpts: int = 3,
    limits: Limits = Limits(),
    progress: Callable[[int], None] | None = None,
) -> Verification:
    """Recompute the challenge's trace with the fast trainer and compare the proof row by row;
    explain the first row that differs with the reference core.

    ``ignore_expiry`` checks an old proof against a challenge that has since expired;
    ``progress`` is called with the number of each step the reference walk has replayed while
    explaining a divergence (a valid proof needs no walk).

    Raises:
        ChallengeRefused: as :func:`check_challenge` and :func:`check_limits`.
    """
    check_challenge(challenge, now=now, ignore_expiry=ignore_expiry)
    check_limits(challenge, limits)
    for name in ("challenge_id", "num_merges"):
        if getattr(proof, name) != getattr(challenge, name):
            return Verification(False, f"{name}: proof has {getattr(proof, name)!r}, challenge has {getattr(challenge, name)!r}")
    if proof.corpus_sha256.lower() != challenge.corpus_sha256.lower():
        return Verification(False, f"corpus_sha256: proof has {proof.corpus_sha256}, challenge has {challenge.corpus_sha256}")
    expected = train_fast(challenge.corpus, challenge.num_merges, workers=1).trace
    claimed = list(proof.merges)
    index = next(
        (i for i, (want, got) in enumerate(itertools.zip_longest(expected, claimed)) if want != got), None
    )
    if index is None:
        return Verification(True)
    return _explain(challenge.corpus, index, expected, claimed, excerpts, progress)


def _explain(
    corpus: list[str],
    index: int,
    expected: list[TraceRow],
    claimed: list[TraceRow],
    excerpts: int,
    progress: Callable[[int], None] | None,
) -> Verification:
    """The divergence at row ``index``, with the sequences of that step replayed by the reference
    walk (when that fits :data:`EXPLAIN_BUDGET`)."""
    want = expected[index] if index < len(expected) else None
    got = claimed[index] if index < len(claimed) else None
    agreed = [(row.left_id, row.right_id) for row in expected[:index]]
    size = sum(len(text.encode("utf-8")) for text in corpus)
    if size * (index + 1) > EXPLAIN_BUDGET:
        problem = "rows differ" if want and got else ("the proof stops early" if want else "the proof has extra rows")
        return Verification(
            False, f"{problem} (too large to replay with the reference: counts not shown)", step=index + 1,
            agreed=agreed, expected=want, claimed=got, expected_count=want.frequency if want else None,
        )
    docs = [list(text.encode("utf-8")) for text in corpus]
    for step in walk(corpus, index + 1, top=1):
        if step.step == index + 1:
            docs = step.before  # the sequences as they stood at the divergent step
            break
        docs = step.after
        if progress is not None:
            progress(step.step)
    return _divergence(index + 1, want, got, docs, agreed, excerpts)


def _divergence(
    step: int, want: TraceRow | None, got: TraceRow | None, docs: list[list[int]], agreed: list[Pair], excerpts: int
) -> Verification:
    counts = count_pairs(docs)
    return Verification(
        False,
        "rows differ" if want and got else ("the proof stops early" if want else "the proof has extra rows"),
        step=step,
        agreed=agreed,
        expected=want,
        claimed=got,
        expected_count=counts.get((want.left_id, want.right_id), 0) if want else None,
        claimed_count=counts.get((got.left_id, got.right_id), 0) if got else None,
        expected_excerpts=_excerpts(docs, (want.left_id, want.right_id), excerpts) if want else [],
        claimed_excerpts=_excerpts(docs, (got.left_id, got.right_id), excerpts) if got else [],
    )


def _excerpts(docs: list[list[int]], pair: Pair, limit: int, width: int = 4) -> list[Excerpt]:
    found: list[Excerpt] = []
    for number, doc in enumerate(docs):
        for position in range(len(doc) - 1):
            if (doc[position], doc[position + 1]) == pair:
                found.append(
                    Excerpt(
                        document=number,
                        position=position,
                        before=doc[max(0, position - width) : position],
                        pair=doc[position : position + 2],
                        after=doc[position + 2 : position + 2 + width],
                    )
                )
                if len(found) == limit:
                    return found
    return found
