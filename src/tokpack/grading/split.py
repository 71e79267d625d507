"""A deterministic train/validation split by document, per domain, with duplicates removed.

The split answers "does the tokenizer compress text it never saw?", so a validation document
must not be a copy of a training one:

1. Exact duplicates: documents with the same *normalized* text (NFKC, case-folded, runs of
   whitespace collapsed) are one document; the first in listing order is kept, the others are
   removed from both parts.
2. Per domain, documents are ranked by SHA-256 of ``seed`` and their relative path and the first
   ``round(n * fraction)`` go to validation (at least one when the domain has two or more). The
   order of files on disk, or of the listing, changes nothing.
3. Near duplicates: a validation document at least half of whose normalized characters are long
   lines (``long_line_chars`` or more) that also occur in training is moved to training: its text
   is training text already, so it would measure memorization. Repeated until no such document
   is left.

:func:`plan_split` decides; :func:`write_split` copies the files byte for byte into
``OUT/train/<domain>/`` and ``OUT/validation/<domain>/`` with ``OUT/split.json`` recording the
decision, atomically.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from tokpack._schema import Record, write_record
from tokpack.errors import InputError
from tokpack.grading.files import corpus_files, read_document

SPLIT_FILE = "split.json"
TRAIN = "train"
VALIDATION = "validation"

_WHITESPACE = re.compile(r"\s+")


class DomainCounts(Record):
    """How one domain's documents were divided."""

    documents: int = Field(ge=0, description="usable files before deduplication")
    train: int = Field(ge=0)
    validation: int = Field(ge=0)
    exact_duplicates: int = Field(ge=0, description="removed: same normalized text as a kept file")
    near_duplicates: int = Field(ge=0, description="moved from validation to train: mostly training lines")


class RemovedDocument(Record):
    """A document that is not where the ranking put it, and why."""

    path: str
    reason: str


class SplitRecord(Record):
    """``split.json``: what a split directory holds and how it was made."""

    schema_: Literal["tokpack.split.v1"] = Field(default="tokpack.split.v1", alias="schema")
    source: str = Field(description="the data folder, as given")
    validation_fraction: float = Field(ge=0.0, lt=1.0)
    seed: str
    long_line_chars: int = Field(ge=1)
    near_duplicate_share: float = Field(gt=0.0, le=1.0)
    domains: dict[str, DomainCounts]
    train: list[str] = Field(description="paths relative to the data folder")
    validation: list[str]
    removed: list[RemovedDocument]
    skipped: list[RemovedDocument] = Field(description="files corpus_files left out")


@dataclass(frozen=True)
class _Document:
    relative: str
    domain: str
    text: str
    normalized: str


def normalize_text(text: str) -> str:
    """The form duplicates are compared in: NFKC, case-folded, whitespace runs as one space.

    >>> normalize_text("  Łódź\\r\\n\\tWIELKA ") == normalize_text("łódź wielka")
    True
    """
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _long_lines(text: str, min_chars: int) -> list[str]:
    lines = (normalize_text(line) for line in text.splitlines())
    return [line for line in lines if len(line) >= min_chars]


def plan_split(
    data_dir: Path,
    *,
    validation: float = 0.1,
    seed: str = "tokpack",
    long_line_chars: int = 40,
    near_duplicate_share: float = 0.5,
) -> SplitRecord:
    """Decide the split of ``data_dir`` (see the module docstring); read-only.

    Raises:
        InputError: ``data_dir`` is not a directory or has no usable file, a fraction outside
            ``[0, 1)``, or an unreadable file.
    """
    if not 0.0 <= validation < 1.0:
        raise InputError(f"validation fraction must be in [0, 1), got {validation}")
    listing = corpus_files(Path(data_dir))
    if not listing.files:
        raise InputError("no usable text file", where=data_dir)
    counts: dict[str, dict[str, int]] = {}
    removed: list[RemovedDocument] = []
    kept_by_text: dict[str, str] = {}
    documents: list[_Document] = []
    for path in listing.files:
        relative, domain = listing.relative(path), listing.domain_of(path)
        tally = counts.setdefault(domain, dict.fromkeys(DomainCounts.model_fields, 0))
        tally["documents"] += 1
        text = read_document(path)
        normalized = normalize_text(text)
        first = kept_by_text.setdefault(normalized, relative)
        if first != relative:
            tally["exact_duplicates"] += 1
            removed.append(RemovedDocument(path=relative, reason=f"exact duplicate of {first}"))
            continue
        documents.append(_Document(relative, domain, text, normalized))

    in_validation = _rank_validation(documents, validation, seed)
    _move_near_duplicates(documents, in_validation, long_line_chars, near_duplicate_share, removed, counts)
    for document in documents:
        counts[document.domain][VALIDATION if document.relative in in_validation else TRAIN] += 1
    return SplitRecord(
        source=str(data_dir),
        validation_fraction=validation,
        seed=seed,
        long_line_chars=long_line_chars,
        near_duplicate_share=near_duplicate_share,
        domains={domain: DomainCounts(**tally) for domain, tally in sorted(counts.items())},
        train=[d.relative for d in documents if d.relative not in in_validation],
        validation=[d.relative for d in documents if d.relative in in_validation],
        removed=removed,
        skipped=[RemovedDocument(path=listing.relative(s.path), reason=s.reason) for s in listing.skipped],
    )


def _rank_validation(documents: list[_Document], fraction: float, seed: str) -> set[str]:
    by_domain: dict[str, list[_Document]] = {}
    for document in documents:
        by_domain.setdefault(document.domain, []).append(document)
    chosen: set[str] = set()
    for members in by_domain.values():
        wanted = round(len(members) * fraction)
        if fraction > 0 and len(members) >= 2:
            wanted = max(wanted, 1)
        ranked = sorted(members, key=lambda d: hashlib.sha256(f"{seed}\0{d.relative}".encode()).digest())
        chosen.update(d.relative for d in ranked[:wanted])
    return chosen


def _move_near_duplicates(
    documents: list[_Document],
    in_validation: set[str],
    long_line_chars: int,
    share: float,
    removed: list[RemovedDocument],
    counts: dict[str, dict[str, int]],
) -> None:
    long_lines = {d.relative: _long_lines(d.text, long_line_chars) for d in documents}
    training_lines = {line for d in documents if d.relative not in in_validation for line in long_lines[d.relative]}
    changed = True
    while changed:
        changed = False
        for document in documents:
            if document.relative not in in_validation or not document.normalized:
                continue
            shared = sum(len(line) for line in long_lines[document.relative] if line in training_lines)
            if shared >= share * len(document.normalized):
                in_validation.discard(document.relative)
                training_lines.update(long_lines[document.relative])
                counts[document.domain]["near_duplicates"] += 1
                removed.append(RemovedDocument(path=document.relative, reason="near duplicate of training text: moved to train"))
                changed = True


def write_split(record: SplitRecord, out_dir: Path, *, overwrite: bool = False) -> Path:
    """Copy the files of ``record`` into ``out_dir`` and write ``split.json``; return its path.

    Files are copied byte for byte from ``record.source``. The directory is built beside
    ``out_dir`` and renamed into place, so an interrupted run leaves no half-written split.

    Raises:
        InputError: ``out_dir`` exists and ``overwrite`` is false.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise InputError("already exists (pass overwrite to replace it)", where=out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    source = Path(record.source)
    building = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        for part, relatives in ((TRAIN, record.train), (VALIDATION, record.validation)):
            for relative in relatives:
                target = building / part / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / relative, target)
        write_record(record, building / SPLIT_FILE)
        if out_dir.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.parent))
            out_dir.rename(retired / out_dir.name)
            building.rename(out_dir)
            shutil.rmtree(retired)
        else:
            building.rename(out_dir)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return out_dir / SPLIT_FILE
