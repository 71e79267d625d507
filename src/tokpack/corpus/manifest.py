"""A corpus's manifest: a text file's name, hash, length and train/validation/test byte ranges, or
the whole documents a folder's, JSON Lines' or Parquet's split holds out.

A manifest belongs to one file: ``CORPUS.manifest.json`` beside it by default, or any path given
as ``manifest=`` (``--manifest``), so a read-only data folder can be split too. A folder-wide
``manifest.json`` beside a corpus is read for the file it names (by ``file``, or, having none, by
its hash); any other file in that folder ignores it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from tokpack._atomic import write_atomically
from tokpack._schema import Record, read_record
from tokpack.errors import InputError

if TYPE_CHECKING:
    from tokpack._files import FileBytes

#: A folder-wide manifest beside a corpus, read for the file it names (tokpack writes a file's own, below).
MANIFEST_FILE = "manifest.json"
#: A text file's own manifest is its name with this added: ``corpus.txt.manifest.json``.
MANIFEST_SUFFIX = ".manifest.json"
SPLITS = ("train", "validation", "test")
CORPUS_SCHEMA = "tokpack.corpus.v1"
SplitName = Literal["train", "validation", "test"]


class Source(Record):
    """Where the documents came from: a file name (not a path: packs move) and its hash."""

    name: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    n_bytes: int = Field(ge=0)


class SplitRule(Record):
    """How ``prepare --validation F [--test F]`` cut a corpus: the shares asked for, and the
    document cut whose boundaries the ranges fall on."""

    validation: float = Field(ge=0, lt=1)
    test: float = Field(ge=0, lt=1)
    document_bytes: int = Field(ge=4)
    separator: str | None = Field(default=None, min_length=1, description="the text that ends a document, if any")

    @model_serializer(mode="wrap")
    def _no_separator_field_without_one(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Written only when set: a cut without a separator is recorded without the field, byte for byte.
        data: dict[str, Any] = handler(self)
        if data.get("separator") is None:
            data.pop("separator", None)
        return data


class CorpusManifest(Record):
    """A corpus file's identity and split.

    ``ranges`` maps ``train`` (required), ``validation`` and ``test`` to half-open byte ranges
    ``[start, end)`` that, sorted by start, tile the whole file with no gap or overlap.

    >>> CorpusManifest(sha256="0" * 64, n_bytes=10, ranges={"train": (0, 8), "validation": (8, 10)}).ranges["train"]
    (0, 8)
    """

    schema_: Literal["tokpack.corpus.v1"] = Field(default="tokpack.corpus.v1", alias="schema")
    file: str | None = Field(default=None, description="the name of the corpus file this manifest belongs to")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    n_bytes: int = Field(ge=0)
    ranges: dict[SplitName, tuple[int, int]]
    made_by: SplitRule | None = Field(default=None, description="how tokpack cut the ranges, when it wrote this file")

    @model_validator(mode="after")
    def _ranges_tile_the_file(self) -> CorpusManifest:
        if "train" not in self.ranges:
            raise InputError("ranges must include 'train'")
        position = 0
        for name, (start, end) in sorted(self.ranges.items(), key=lambda item: item[1]):
            if start != position or end < start:
                raise InputError(f"range {name!r} [{start}, {end}) leaves a gap or overlaps at byte {position}")
            position = end
        if position != self.n_bytes:
            raise InputError(f"ranges end at byte {position}, the file has {self.n_bytes}")
        return self

    def ordered_ranges(self) -> list[tuple[str, int, int]]:
        """``(name, start, end)`` in file order."""
        return [(name, *span) for name, span in sorted(self.ranges.items(), key=lambda item: item[1])]


def file_sha256(path: Path, *, chunk_bytes: int = 1 << 20) -> str:
    """SHA-256 of a file, read chunk by chunk into one buffer: memory stays flat, and no chunk
    is a new allocation whose pages the kernel must hand out again (page faults are part of
    ``prepare``'s fixed cost: BENCHMARKS.md, "prepare's fixed cost")."""
    digest = hashlib.sha256()
    buffer = bytearray(chunk_bytes)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while size := handle.readinto(buffer):
            digest.update(view[:size])
    return digest.hexdigest()


def manifest_beside(corpus: Path) -> Path:
    """Where a text file's own manifest lives by default.

    >>> manifest_beside(Path("data/a.txt")).as_posix()
    'data/a.txt.manifest.json'
    """
    return corpus.with_name(corpus.name + MANIFEST_SUFFIX)


def find_manifest(corpus: Path, sha256: str | None, manifest: Path | None = None) -> tuple[Path, CorpusManifest] | None:
    """The manifest that applies to ``corpus``, and where it is; ``None`` when none does.

    ``manifest`` when given (it must exist); else ``CORPUS.manifest.json`` beside the file; else
    the folder's ``manifest.json`` when it names this file (its ``file``, or, written without one,
    its hash and length: a manifest of another file in the folder never applies here). ``sha256``
    is the file's, or ``None`` to hash it only if that last case needs it.

    Raises:
        InputError: a manifest given that is missing, unreadable or names another file.
    """
    candidates = [manifest] if manifest is not None else [manifest_beside(corpus), corpus.parent / MANIFEST_FILE]
    for path in candidates:
        if not path.exists():
            if manifest is not None:
                raise InputError("no such manifest", where=path, fix="write it with validation= or test= and manifest=PATH, or drop manifest=")
            continue
        if manifest is None and path.name == MANIFEST_FILE and _schema_of(path) not in (None, CORPUS_SCHEMA):
            continue  # another tool's manifest.json (a tokenizer's, say), not a corpus's
        record = read_record(CorpusManifest, path)
        if path.name == MANIFEST_FILE and manifest is None:  # the folder's: only for the file it names
            if record.file is None and (record.n_bytes != corpus.stat().st_size
                                        or record.sha256 != (sha256 or file_sha256(corpus))):
                continue
            if record.file is not None and record.file != corpus.name:
                continue
        elif record.file is not None and record.file != corpus.name:
            raise InputError(f"is the manifest of {record.file}, not of {corpus.name}", where=path,
                             fix=f"give {corpus.name}'s own manifest, or cut it again with validation= or test=")
        return path, record
    return None


def _schema_of(path: Path) -> object:
    """The ``schema`` field of a JSON object file, or ``None`` (unreadable files are left to
    :func:`read_record`, which names what is wrong)."""
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return document.get("schema") if isinstance(document, dict) else None


def separator_setting(separator: str | None) -> str:
    """``separator`` as a message names it, a ``name=value`` the command line says as its flag.

    >>> separator_setting("<|endoftext|>"), separator_setting(None)
    ("separator='<|endoftext|>'", 'separator=None')
    """
    return f"separator={separator!r}"


def cut_differences(rule: SplitRule, *, document_bytes: int | None, separator: str | None) -> list[tuple[str, str]]:
    """What differs between the cut a manifest's ranges were made with and the one asked for, as
    ``(made with, asked for)`` pairs of ``name=value`` settings (empty when they agree; ``document_bytes=None`` asks for
    no particular size)."""
    differences = []
    if rule.separator != separator:
        differences.append((separator_setting(rule.separator), separator_setting(separator)))
    if document_bytes is not None and rule.document_bytes != document_bytes:
        differences.append((f"document_bytes={rule.document_bytes}", f"document_bytes={document_bytes}"))
    return differences


#: The longest document when neither the caller nor a manifest says otherwise.
DEFAULT_DOCUMENT_BYTES = 1 << 20


def recorded_cut(corpus: Path, *, document_bytes: int | None, separator: str | None,
                 manifest: Path | None = None) -> tuple[int, str | None]:
    """The document cut to read the text file ``corpus`` by: what the caller asked for, and, for
    what it left unsaid (``None``), the rule its manifest's ranges were cut with (see
    :func:`find_manifest`), else :data:`DEFAULT_DOCUMENT_BYTES` and no separator. So a corpus cut
    with ``--document-bytes 4096`` is read that way by every later run that does not ask for
    another size (which :func:`corpus_manifest` refuses).

    Raises:
        InputError: a manifest given that is unreadable or names another file.
    """
    rule = None
    # A manifest given but not there yet is about to be written (--validation); its absence is
    # reported by whatever reads it.
    if (document_bytes is None or separator is None) and corpus.is_file() and (manifest is None or manifest.exists()):
        found = find_manifest(corpus, None, manifest)
        rule = None if found is None else found[1].made_by
    if document_bytes is None:
        document_bytes = DEFAULT_DOCUMENT_BYTES if rule is None else rule.document_bytes
    if separator is None and rule is not None:
        separator = rule.separator
    return document_bytes, separator


def _cut_mismatch(path: Path, differences: list[tuple[str, str]]) -> InputError:
    made = " ".join(made for made, _ in differences)
    asked = " ".join(asked for _, asked in differences)
    again = " and ".join(f"drop {asked}" if made == separator_setting(None) else f"pass {made}"
                         for made, asked in differences)
    return InputError(f"its ranges were cut with {made}, this run asks for {asked}", where=path,
                      fix=f"{again} as when it was made, or delete it to cut the corpus again")


def corpus_manifest(corpus: Path, sha256: str, *, manifest: Path | None = None, separator: str | None = None,
                    document_bytes: int | None = None, data: FileBytes | None = None) -> tuple[CorpusManifest, Path | None]:
    """The manifest of ``corpus`` (see :func:`find_manifest`), checked against the file, and
    where it was found; or all-training and ``None`` when none applies.

    Args:
        corpus: the corpus text file.
        sha256: its SHA-256 (already computed by the caller, who needs it too).
        manifest: a manifest elsewhere than beside the file.
        separator: the document separator, which no range boundary may cut in two.
        document_bytes: the document size asked for.
        data: the file's bytes, already open (a compressed file's decompressed text, which its
            ranges cut); by default the file itself.

    Raises:
        InputError: the manifest is malformed, or its hash or length differs from the file, or a
            range starts inside a character or a separator, or tokpack cut its ranges with another
            separator or document size than the one asked for (its documents would differ from
            the ones it was split on: it is refused, never recut, so a held-out range never moves).
    """
    n_bytes = corpus.stat().st_size if data is None else len(data)
    found = find_manifest(corpus, sha256, manifest)
    if found is None:
        return CorpusManifest(file=corpus.name, sha256=sha256, n_bytes=n_bytes, ranges={"train": (0, n_bytes)}), None
    path, manifest_record = found
    # The ranges were cut on the file as it was: they never move silently with an edit.
    edited = (f"restore {corpus.name} as it was when split, or delete {path} to cut it again (the held-out "
              "ranges move, so evaluate anew)")
    if manifest_record.n_bytes != n_bytes:
        raise InputError(f"{n_bytes:,} bytes, but {path} says {manifest_record.n_bytes:,}: it changed since it was split",
                         where=corpus, fix=edited)
    if manifest_record.sha256 != sha256:
        raise InputError(f"SHA-256 {sha256[:16]}… differs from {path} ({manifest_record.sha256[:16]}…): it changed "
                         "since it was split", where=corpus, fix=edited)
    if manifest_record.made_by is not None and (differences := cut_differences(
            manifest_record.made_by, document_bytes=document_bytes, separator=separator)):
        raise _cut_mismatch(path, differences)
    from tokpack._files import open_bytes
    from tokpack.corpus.documents import inside_separator

    opened = data is None
    data = open_bytes(corpus) if data is None else data  # a boundary inside a character would be blamed on the corpus
    try:
        for name, start, _ in manifest_record.ordered_ranges():
            if 0 < start < n_bytes and data[start] & 0xC0 == 0x80:
                raise InputError(f"range {name!r} starts at byte {start}, inside a UTF-8 character of {corpus.name}", where=path,
                                 fix="move the boundary to the start of a character")
            if separator and 0 < start < n_bytes and inside_separator(data, start, separator.encode("utf-8")):
                raise InputError(f"range {name!r} starts at byte {start}, inside the separator {separator!r}", where=path,
                                 fix="move the boundary before or after the separator")
    finally:
        if opened:
            data.close()
    return manifest_record, path


def split_manifest(corpus: Path, *, validation: float, test: float = 0.0, document_bytes: int,
                   separator: str | None = None, manifest: Path | None = None) -> CorpusManifest:
    """Write the manifest of a text file (``CORPUS.manifest.json`` beside it, or ``manifest``),
    its last ``test`` and, before it, its last ``validation`` share of bytes held out, each range
    cut on a document boundary (the rule of :mod:`tokpack.corpus.documents`, with ``separator``,
    so no document spans two ranges and no separator is cut in two) and the rule recorded in
    ``made_by``. A manifest already there is kept when it records the same rule.

    >>> import tempfile
    >>> corpus = Path(tempfile.mkdtemp()) / "c.txt"
    >>> _ = corpus.write_bytes(b"line\\n" * 100)
    >>> split_manifest(corpus, validation=0.1, test=0.05, document_bytes=12).ranges
    {'train': (0, 420), 'validation': (420, 470), 'test': (470, 500)}
    >>> sorted(path.name for path in corpus.parent.iterdir())
    ['c.txt', 'c.txt.manifest.json']

    Raises:
        InputError: a share out of range, a corpus too small to hold out anything, a manifest
            already there with other ranges, or one that cannot be written there.
    """
    from tokpack.corpus.documents import cut_documents, inside_separator

    rule = SplitRule(validation=validation, test=test, document_bytes=document_bytes, separator=separator)  # checks the ranges
    if validation + test >= 1 or validation + test <= 0:
        raise InputError(f"validation={validation} and test={test} must hold out a share between 0 and 1")
    from tokpack._files import open_bytes

    opened = open_bytes(corpus)  # a compressed file is split as its decompressed text
    try:
        data = opened[0 : len(opened)]
    finally:
        opened.close()
    marker = separator.encode("utf-8") if separator else None
    # A boundary may fall at any document's start or end (with a separator, on either side of it).
    bounds = np.fromiter((offset for span in cut_documents(data, 0, len(data), document_bytes, marker) for offset in span), np.int64)
    candidates = np.unique(np.concatenate(([0, len(data)], bounds)))

    def boundary(share: float) -> int:
        """The document boundary nearest to the share's byte (a range may be empty, never split one)."""
        for index in np.argsort(np.abs(candidates - len(data) * share), kind="stable"):
            if marker is None or not inside_separator(data, int(candidates[index]), marker):
                return int(candidates[index])
        return 0  # pragma: no cover - 0 is always a candidate, never inside anything

    a, b = boundary(1 - validation - test), boundary(1 - test)
    ranges: dict[SplitName, tuple[int, int]] = {"train": (0, a)}
    if validation:
        ranges["validation"] = (a, b)
    if test:
        ranges["test"] = (b, len(data))
    if not validation:
        ranges["train"] = (0, b)
    made = CorpusManifest(file=corpus.name, sha256=hashlib.sha256(data).hexdigest(), n_bytes=len(data), ranges=ranges,
                          made_by=rule)
    path = manifest or manifest_beside(corpus)
    if path.exists():
        existing = read_record(CorpusManifest, path)
        if existing != made:
            if existing.made_by is not None and (differences := cut_differences(
                    existing.made_by, document_bytes=document_bytes, separator=separator)):
                raise _cut_mismatch(path, differences)
            shares = "" if existing.made_by is None else \
                f" (made with validation={existing.made_by.validation:g}, test={existing.made_by.test:g})"
            raise InputError(f"already there with other ranges{shares}", where=path,
                             fix="delete it to cut the corpus again, or drop validation= and test= to use it")
        return existing
    try:
        write_atomically(path, made.to_json())
    except OSError as error:
        raise InputError(f"cannot write the split ({error.strerror or error})", where=path,
                         fix="give manifest=PATH in a folder you can write") from None
    return made


DOCUMENTS_SCHEMA = "tokpack.corpus.documents.v1"


class HeldOutShares(Record):
    """The shares of documents ``prepare(validation=, test=)`` held out of a folder, JSON Lines or Parquet corpus."""

    validation: float = Field(ge=0, lt=1)
    test: float = Field(ge=0, lt=1)
#: Shares are held out exactly to this many parts (nine decimal places), in integer arithmetic.
_SHARE_SCALE = 10**9


class DocumentSplit(Record):
    """Which whole documents of a folder, JSON Lines or Parquet corpus are held out: its files,
    records (lines) or rows, chosen by :func:`held_out_ranges` from the shares in ``made_by``.

    Written beside the corpus (``FOLDER.manifest.json``, ``FILE.jsonl.manifest.json``) or where
    ``manifest=`` says; checked against the corpus (its hash and unit count) whenever it is read,
    so an edited corpus never moves its held-out documents silently.
    """

    schema_: Literal["tokpack.corpus.documents.v1"] = Field(default="tokpack.corpus.documents.v1", alias="schema")
    file: str = Field(description="the name of the folder or file this split belongs to")
    format: Literal["directory", "jsonl", "parquet"]
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="the corpus's hash, as its pack's source records it")
    units: int = Field(ge=0, description="files (a folder), lines (JSON Lines) or rows (Parquet) the rule ran over")
    counts: dict[SplitName, int] = Field(description="how many of them each range holds")
    made_by: HeldOutShares

    def ranges(self) -> np.ndarray:
        """The range of every unit: 0 train, 1 validation, 2 test (see :func:`held_out_ranges`)."""
        return held_out_ranges(self.units, self.made_by.validation, self.made_by.test)


def held_out_ranges(n_units: int, validation: float, test: float) -> np.ndarray:
    """The range of each of ``n_units`` documents in order (0 train, 1 validation, 2 test), held
    out evenly spread: with ``h = validation + test``, document ``i`` is held out when
    ``round((i + 1) * h) > round(i * h)`` (so about ``n_units * h`` of them, one every ``1/h``),
    and the ``j``-th held-out one is test when ``round((j + 1) * test / h) > round(j * test / h)``,
    else validation. Shares are read to nine decimal places and computed in integers, so the rule
    gives the same documents on every machine.

    >>> held_out_ranges(10, 0.2, 0.1).tolist()
    [0, 1, 0, 0, 2, 0, 0, 0, 1, 0]
    >>> held_out_ranges(5, 0.1, 0.0).tolist()  # the nearest count: one of five
    [0, 0, 0, 0, 1]
    """
    held_share, test_share = round((validation + test) * _SHARE_SCALE), round(test * _SHARE_SCALE)
    half = _SHARE_SCALE // 2
    index = np.arange(n_units, dtype=np.int64)
    held = ((index + 1) * held_share + half) // _SHARE_SCALE > (index * held_share + half) // _SHARE_SCALE
    ranges = np.zeros(n_units, np.int8)
    order = np.arange(int(held.sum()), dtype=np.int64)
    half_held = held_share // 2
    is_test = ((order + 1) * test_share + half_held) // max(held_share, 1) > (order * test_share + half_held) // max(held_share, 1)
    ranges[held] = np.where(is_test, 2, 1)
    return ranges


def find_split(corpus: Path, manifest: Path | None = None) -> tuple[Path, DocumentSplit] | None:
    """The document split of a folder, JSON Lines or Parquet corpus, and where it is: ``manifest``
    when given (it must exist), else ``CORPUS.manifest.json`` beside it; ``None`` when none is.

    Raises:
        InputError: a manifest given that is missing, or one that is no document split.
    """
    path = manifest or manifest_beside(corpus)
    if not path.exists():
        if manifest is not None:
            raise InputError("no such manifest", where=path, fix="write it with validation= or test= and manifest=, or drop manifest=")
        return None
    if _schema_of(path) == CORPUS_SCHEMA:
        raise InputError(f"is the manifest of one text file (byte ranges), not a split of {corpus.name}'s documents",
                         where=path, fix="give the folder's or file's own manifest, or delete it to split again")
    return path, read_record(DocumentSplit, path)


def check_split(split: DocumentSplit, path: Path, *, name: str, format: str, sha256: str, units: int) -> None:
    """Refuse a document split that is not of this corpus as it stands.

    Raises:
        InputError: naming the manifest, what differs, and the fix (restore the corpus, or delete
            the manifest to split again, which moves the held-out documents).
    """
    if split.file != name or split.format != format:
        raise InputError(f"is the split of {split.file} ({split.format}), not of {name} ({format})", where=path,
                         fix="give this corpus's own manifest, or delete it to split again")
    if split.units != units or split.sha256 != sha256:
        now = f"{units:,} units, SHA-256 {sha256[:16]}…" if split.units != units else f"SHA-256 {sha256[:16]}…"
        then = f"{split.units:,} units, SHA-256 {split.sha256[:16]}…" if split.units != units else f"{split.sha256[:16]}…"
        raise InputError(f"{name} changed since it was split ({now} now, {then} in {path.name})", where=path,
                         fix=f"restore {name} as it was, or delete {path.name} to split it again "
                             "(the held-out documents change, so evaluate anew)")
    # Written by tokpack, the shares hold out a part and the counts are what they hold out; a
    # file that says otherwise was edited, and its documents cannot be trusted to be held out.
    forged = "delete it to split the corpus again (the held-out documents change, so evaluate anew)"
    shares = split.made_by.validation + split.made_by.test
    if not 0 < shares < 1:
        raise InputError(f"its shares (validation {split.made_by.validation:g}, test {split.made_by.test:g}) hold out "
                         f"{'every' if shares >= 1 else 'no'} document, which no split does (edited?)", where=path, fix=forged)
    held = dict(zip(SPLITS, np.bincount(split.ranges(), minlength=3).tolist()))
    if split.counts != {name: count for name, count in held.items() if name == "train" or getattr(split.made_by, name)}:
        raise InputError(f"its counts {split.counts} are not what its shares hold out of {split.units:,} ({held}; edited?)",
                         where=path, fix=forged)
