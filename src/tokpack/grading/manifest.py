"""``manifest.json``: what a trained tokenizer was made from, under which licences, and how.

Every training file is named with its domain, SHA-256, the package it was extracted from and that
package's licence. Licences are looked up by file-name prefix in :data:`KNOWN_SOURCES`, which
transcribes ``data/SOURCES.md``; a file no rule covers is recorded as ``unknown`` and the
caller is told, so an artifact is never shipped with an unnamed licence by accident.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import Field

from tokpack._schema import Record, read_record
from tokpack.grading.split import SPLIT_FILE, SplitRecord
from tokpack.grading.training import TrainingRecipe
from tokpack.vocab import BpeTokenizer, VocabIdentity

MANIFEST_FILE = "manifest.json"

#: ``(domain or None for any, file-name prefix) -> (package, licence)``, first match wins.
KNOWN_SOURCES: list[tuple[str | None, str, str, str]] = [
    (None, "wesnoth-", "wesnoth-1.16 (Polish translation; English and other languages in other/)", "GPL-2+"),
    (None, "freeciv-", "freeciv-data (nation legends)", "GPL-2+"),
    (None, "fortunes-", "fortunes-pl", "GPL-2+"),
    ("technical", "man-", "manpages-pl / manpages-pl-dev (rendered with groff)", "GPL-3+"),
    ("technical", "lo-", "libreoffice-help-pl (non-Calc pages)", "MPL-2.0"),
    ("technical", "tex-", "texlive-lang-polish (TeX Virtual Academy pages and sources)", "TeX Live licences (per file)"),
    ("technical", "kicad-", "kicad-doc-pl", "GPL-3+"),
    ("technical", "debian-edu-", "debian-edu-doc-legacy-pl", "GPL-2+"),
    ("numbers", "lo-", "libreoffice-help-pl (Calc pages)", "MPL-2.0"),
    ("numbers", "iso-", "iso-codes (Polish names)", "LGPL-2.1+"),
    ("code", "bpp-", "django-bpp 1.0.9 (PyPI)", "MIT"),
    ("code", "tex-", "texlive-lang-polish (TeX macro sources)", "TeX Live licences (per file)"),
    ("emoji", "emoji-", "unicode-data (emoji-test.txt, Unicode 15.0)", "Unicode data licence"),
]

UNKNOWN = "unknown"


class SourceFile(Record):
    """One training file."""

    path: str = Field(description="relative to the training folder")
    domain: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    characters: int = Field(ge=1)
    package: str
    licence: str


class SplitSummary(Record):
    """The split the training folder came from, when it came from ``tokpack tokenizer split``."""

    source: str
    validation_fraction: float
    seed: str
    validation_files: list[str] = Field(description="never used for training")
    removed: list[str] = Field(description="'path: reason' for duplicates removed or moved")


class TokenizerManifest(Record):
    """``manifest.json`` beside a trained ``tokenizer.json``."""

    schema_: Literal["tokpack.tokenizer-manifest.v1"] = Field(default="tokpack.tokenizer-manifest.v1", alias="schema")
    identity: VocabIdentity
    files: dict[str, str] = Field(description="file name -> SHA-256 of the files written with it")
    recipe: TrainingRecipe
    data_preparation: str
    split: SplitSummary | None
    licences: dict[str, int] = Field(description="licence -> number of training files under it")
    sources: list[SourceFile]


def licence_of(domain: str, file_name: str) -> tuple[str, str]:
    """``(package, licence)`` of a file of the repository's ``data/``, or ``("unknown", "unknown")``.

    >>> licence_of("code", "bpp-bpp_admin_core.py.txt")
    ('django-bpp 1.0.9 (PyPI)', 'MIT')
    """
    for rule_domain, prefix, package, licence in KNOWN_SOURCES:
        if (rule_domain is None or rule_domain == domain) and file_name.startswith(prefix):
            return package, licence
    return UNKNOWN, UNKNOWN


def build_manifest(
    tokenizer: BpeTokenizer,
    recipe: TrainingRecipe,
    used: list[tuple[Path, str]],
    train_dirs: list[Path],
    written: list[Path],
) -> TokenizerManifest:
    """Describe a tokenizer trained on ``used`` (path, domain) files found under ``train_dirs``.

    A ``split.json`` in the parent of a training folder (the layout ``split`` writes) is summarized.
    """
    sources = []
    for path, domain in used:
        root = next(d for d in train_dirs if path.is_relative_to(d))
        data = path.read_bytes()
        package, licence = licence_of(domain, path.name)
        sources.append(SourceFile(
            path=path.relative_to(root).as_posix(), domain=domain, sha256=hashlib.sha256(data).hexdigest(),
            characters=len(data.decode("utf-8")), package=package, licence=licence,
        ))
    split = None
    split_json = Path(train_dirs[0]).parent / SPLIT_FILE
    if split_json.is_file():
        record = read_record(SplitRecord, split_json)
        split = SplitSummary(
            source=record.source, validation_fraction=record.validation_fraction, seed=record.seed,
            validation_files=record.validation, removed=[f"{r.path}: {r.reason}" for r in record.removed],
        )
    weights = ", ".join(f"{d}={w:g}" for d, w in sorted(recipe.domain_weights.items())) or "none"
    preparation = (
        "Files are used byte for byte (strict UTF-8, line endings kept, no normalization). "
        + ("They come from `tokpack tokenizer split` (per-domain document split; exact duplicates by "
           "NFKC/case-folded/whitespace-collapsed text removed; validation documents mostly made of "
           f"training lines moved to training; seed {split.seed!r}, validation share {split.validation_fraction:g}); "
           "validation files never entered training. " if split else "")
        + f"Domain weights (document repetitions): {weights}. Trainer: {recipe.trainer}; "
        + (f"{recipe.vocab_size - 1 - recipe.phrase_merges} word-level ranks, then {recipe.phrase_merges} phrase merges; "
           if recipe.phrase_merges else "")
        + "<|endoftext|> is the last id."
    )
    return TokenizerManifest(
        identity=tokenizer.identity,
        files={p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in written},
        recipe=recipe,
        data_preparation=preparation,
        split=split,
        licences=dict(sorted(Counter(s.licence for s in sources).items())),
        sources=sources,
    )
