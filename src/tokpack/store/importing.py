"""Convert another framework's token files (Megatron, nanoGPT, datatrove, and tokpack's own
litdata, MDS and Parquet exports) into a verified pack.

Each kind is a format of :data:`~tokpack.store.formats.FORMATS`; :func:`detect` tells them apart
by their files. The
separators a format puts after documents are removed when they are structure (nanoGPT's
end-of-text; Megatron's end-of-document ids when tokpack's sidecar says it appended them), so an
export followed by an import gives back byte-identical ``tokens.npy`` and ``starts.npy``.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tokpack import _checks as checks
from tokpack._atomic import publish, temporary_sibling
from tokpack.errors import InputError, IntegrityError
from tokpack.store.carried import vouch
from tokpack.store.format import DocumentCut, PackMeta, Source, Span
from tokpack.store.formats import FORMATS
from tokpack.store.reader import Pack
from tokpack.store.sidecar import SIDECAR, read_sidecar
from tokpack.store.source import TokenSource, chunks
from tokpack.store.stamps import is_stamped, stamp
from tokpack.store.vocabulary import carried_vocabulary_files
from tokpack.store.writer import PackWriter
from tokpack.vocab.loading import VocabularySpec, load_vocabulary


def detect(path: Path) -> str:
    """The kind of ``path``: the format a tokpack export's sidecar in the folder names, else the
    first of :data:`~tokpack.store.formats.FORMATS` that recognizes its files (a Megatron prefix
    or its ``.bin``/``.idx``, a datatrove folder of ``.ds`` files, a nanoGPT ``.bin`` or folder).

    Raises:
        InputError: none of them.
    """
    path = Path(path)
    sidecar = read_sidecar(path / SIDECAR) if path.is_dir() else None
    if sidecar is not None and sidecar.format in FORMATS:
        return sidecar.format
    for name, fmt in FORMATS.items():
        if fmt.load().recognizes(path):
            return name
    raise InputError("neither a Megatron prefix (.bin/.idx), a nanoGPT .bin (or folder), a datatrove folder (.ds) "
                     "nor a tokpack litdata, mds or hf export (tokpack-export.json)", where=path)


def open_foreign(path: str | Path, *, kind: str | None = None, tokenizer: VocabularySpec | None = None,
                 eod_id: int | None = None, verify: bool | None = False) -> TokenSource:
    """Open another framework's files in place as a token source (the ``read`` of a format in
    :data:`~tokpack.store.formats.FORMATS`).

    ``verify``: ``True`` verifies now; ``None`` verifies a tokpack export against its sidecar
    unless its stamp shows it unchanged (:func:`verify_unless_stamped`); ``False`` checks headers
    and sizes only.

    Raises:
        InputError: ``kind`` names another format than ``path``'s files are.
    """
    if kind is not None and kind not in FORMATS:
        raise InputError(f"unknown kind {kind!r}", fix=f"use one of {', '.join(FORMATS)}")
    if eod_id is not None:  # an id no file holds would only be found missing at every document
        checks.non_negative_int("eod_id", eod_id)
    try:
        found: str | None = detect(Path(path))
    except InputError:
        if kind is None:
            raise
        found = None
    if kind is not None and found is not None and found != kind:
        raise InputError(f"is a {found} export, not {kind}", where=path, fix=f"use kind={found!r}, or leave kind= out")
    kind = kind or found
    assert kind is not None
    source: TokenSource = FORMATS[kind].load().read(Path(path), tokenizer=tokenizer, eod_id=eod_id)
    if verify:
        source.verify()
    elif verify is None:
        verify_unless_stamped(source)
    return source


def verify_unless_stamped(source: TokenSource) -> None:
    """Verify a tokpack export read in place against its sidecar's checksums, as a pack is on
    its first open: unless a verification stamp shows its files unchanged since they last
    matched (see :mod:`tokpack.store.stamps`). Files that record no checksums are left to the
    per-batch id checks.

    Raises:
        IntegrityError / VocabularyMismatch: naming the file that does not match.
    """
    sidecar = getattr(source, "sidecar", None)
    recorded = sorted(getattr(sidecar, "files_sha256", None) or {})
    if sidecar is None or not recorded:
        return
    where = Path(source.path)
    root = getattr(source, "folder", None) or (where if where.is_dir() else where.parent)
    seal = hashlib.sha256(sidecar.to_json().encode("utf-8")).hexdigest()
    if not is_stamped(root, seal, recorded):
        source.verify()
        stamp(root, seal, recorded)


def import_pack(path: str | Path, out: str | Path, *, kind: str | None = None, tokenizer: VocabularySpec | None = None,
                eod_id: int | None = None, strip_eod: bool | None = None,
                progress: Callable[[int], None] | None = None, opened: TokenSource | None = None) -> PackMeta:
    """Convert ``path`` into a new pack at ``out``: the input is verified first (against its
    sidecar's checksums when tokpack exported it), the pack is built and verified in a hidden
    temporary, compared with the exported pack's checksums, and only then renamed to ``out``; a
    refused import leaves nothing at ``out``.

    Args:
        eod_id: the id that ends every document: nanoGPT's separator (default: the sidecar's or
            the tokenizer's ``<|endoftext|>``); for Megatron and datatrove, naming it strips it.
        opened: ``path`` already opened by :func:`open_foreign` (it is verified again here).
        strip_eod: drop the id that ends every document (default: nanoGPT's separators always;
            Megatron's when tokpack's sidecar says it appended them or ``eod_id`` is given).

    Raises:
        InputError, IntegrityError, VocabularyMismatch: unreadable input; a document not ending
            with the separator being stripped; a result that differs from the exported pack.
    """
    out = Path(out)
    if eod_id is not None:
        checks.non_negative_int("eod_id", eod_id)
    if out.exists():
        raise InputError("already exists; a pack is never overwritten", where=out, fix="remove it or pick another OUT")
    kind = kind or detect(Path(path))
    source = opened or open_foreign(path, kind=kind, tokenizer=tokenizer, eod_id=eod_id)
    source.verify()
    # The vocabulary the user named travels in the pack, so it decodes wherever it is copied
    # (the readers above have already refused one whose identity contradicts the ids).
    carried = None if tokenizer is None else load_vocabulary(tokenizer)
    files = carried.files() if carried is not None and carried.identity == source.vocabulary else {}
    if files:
        vouch(files, source.vocabulary)  # made from the vocabulary here: the pack's check need not read them back
    else:  # a tokpack export carries its pack's vocabulary files (checked against its sidecar)
        files = carried_vocabulary_files(source)
    scratch = temporary_sibling(out)
    try:
        meta = _import_into(source, scratch / out.name, kind=kind, eod_id=eod_id, strip_eod=strip_eod, progress=progress,
                            vocabulary_files=files)
        publish(scratch / out.name, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return meta


def _import_into(source: TokenSource, out: Path, *, kind: str, eod_id: int | None, strip_eod: bool | None,
                 progress: Callable[[int], None] | None, vocabulary_files: dict[str, bytes]) -> PackMeta:
    """Write ``source`` as the pack ``out``, with ``vocabulary_files`` in its ``vocabulary/``, and
    verify it (see :func:`import_pack`)."""
    sidecar = getattr(source, "sidecar", None)
    separated = FORMATS[kind].separated
    if separated:  # its separators are structure: always known, always removed
        separator = getattr(source, "eod_id", None)
    else:  # an id the user names, or the one tokpack's sidecar says it appended
        separator = eod_id if eod_id is not None else (sidecar.eod_id if sidecar else None)
    if strip_eod is None:
        strip_eod = separator is not None
    if strip_eod and separator is None:
        raise InputError("no end-of-document id to strip", where=source.path, fix="pass eod_id=ID")
    ranges: dict[str, Span] = {}
    found_separator = 0
    report = progress or (lambda _: None)
    with PackWriter(out, vocabulary=source.vocabulary) as writer:
        if vocabulary_files:
            writer.add_vocabulary_files(vocabulary_files)
        for name, (d0, d1) in _segments(source):
            begin = (writer.n_docs, writer.n_tokens)
            for ids, lengths in chunks(source, (d0, d1)):
                if strip_eod:
                    ends = np.cumsum(lengths) - 1
                    if len(ends) and np.any(ids[ends] != separator):
                        # A structural separator (nanoGPT's) comes from the tokenizer: keeping it would import the
                        # ids under what is most likely the wrong vocabulary
                        fix = ("import with strip_eod=False" if not separated else
                               f"{separator} is the <|endoftext|> of the tokenizer given; check that it is the "
                               "vocabulary that made these ids (tokenizer=PATH), or name the separator with eod_id=ID"
                               if eod_id is None else
                               f"name the id that ends each document with eod_id=ID (eod_id={eod_id} was given)")
                        raise IntegrityError(f"a document does not end with the id {separator}", where=source.path, fix=fix)
                    ids, lengths = np.delete(ids, ends), lengths - 1
                if separator is not None:
                    found_separator += int(np.count_nonzero(ids == separator))
                writer.add_flat(ids, lengths)
                report(int(lengths.sum()))
            if name is not None:
                ranges[name] = Span(documents=(begin[0], writer.n_docs), tokens=(begin[1], writer.n_tokens))
        # The exported pack comes back when every document of it does, as it was: none kept
        # with a separator the export appended. Then its record is restored (the sidecar's
        # fields were checked against it on open), and its checksums must match below.
        restored = sidecar is not None and _exported_whole(sidecar, source) and (sidecar.eod_id is None or strip_eod)
        counts: dict[str, int] = {}
        if sidecar is not None and restored:
            ranges = dict(sidecar.ranges) or ranges
            counts = dict(sidecar.sealed_record.counts if sidecar.sealed_record is not None else sidecar.counts)
        if sidecar is not None:  # the exported pack's padding id, unless separators kept made it a real token
            pad_id = None if found_separator and sidecar.pad_id == separator else sidecar.pad_id
            origin, cut = sidecar.source, sidecar.cut
        else:
            pad_id = separator if strip_eod and not found_separator else None
            n_bytes = int(sum(getattr(part.tokens, "nbytes", 0) for part in getattr(source, "shards", [])))
            origin = Source(name=Path(source.path).name, sha256=source.meta.tokens_sha256, n_bytes=n_bytes)
            cut = DocumentCut(rule=kind)
        meta = writer.commit(source=origin, cut=cut, ranges=ranges, pad_id=pad_id, counts=counts)
    try:
        Pack(Path(out), verify=True)
    except IntegrityError as error:  # said of the input: the pack it was written to never appears
        raise IntegrityError(f"the pack it imports into does not verify ({error.what})", where=source.path,
                             fix=error.fix or "export it again from the pack") from None
    if restored and sidecar is not None and (meta.tokens_sha256, meta.starts_sha256) != (sidecar.source_tokens_sha256, sidecar.source_starts_sha256):
        raise IntegrityError("the imported ids differ from the pack that was exported; nothing imported", where=source.path,
                             fix="the export was altered: export it again from the pack")
    return meta


def _segments(source: TokenSource) -> list[tuple[str | None, tuple[int, int]]]:
    """The source's named ranges in document order, with unnamed gaps, covering every document."""
    segments: list[tuple[str | None, tuple[int, int]]] = []
    at = 0
    for name, span in sorted(source.meta.ranges.items(), key=lambda item: item[1].documents):
        d0, d1 = span.documents
        if d0 < at:
            continue  # overlapping ranges: the first one in order wins
        if d0 > at:
            segments.append((None, (at, d0)))
        segments.append((name, (d0, d1)))
        at = d1
    if at < source.n_docs:
        segments.append((None, (at, source.n_docs)))
    return segments


def _exported_whole(sidecar: Any, source: TokenSource) -> bool:
    """Whether the export holds every document of the pack it came from, and ``source`` read them all."""
    held = sum(part.documents[1] - part.documents[0] for part in sidecar.parts.values())
    return held == sidecar.source_n_docs == source.n_docs


__all__ = ["detect", "import_pack", "open_foreign", "verify_unless_stamped"]
