"""Packs and sharded datasets on object storage (any fsspec URL: ``s3://``, ``gs://``, ``hf://``,
``file://``), read through a bounded local cache; exports and datasets uploaded so that a
half-uploaded one never opens.

Reading: the record (``dataset.json`` or a pack's ``meta.json``, seal checked) and every shard's
``meta.json`` and ``starts.npy`` are fetched on open (small; each checked against the record);
a shard's ``tokens.npy`` is fetched when first touched, hashed while it downloads, and used only
if it matches the record. The cache holds at most ``cache_bytes``: the least recently touched
shards are dropped (and fetched again if needed), so a dataset larger than the cache still serves.

Writing: everything is written and verified locally, uploaded, and the record that makes it
openable (``dataset.json``, the export's sidecar) goes last.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tokpack import _checks as checks
from tokpack._atomic import partial_sibling
from tokpack._schema import read_record
from tokpack.errors import InputError, IntegrityError, TokpackError, VocabularyMismatch
from tokpack.store.carried import Carrier, check_carried
from tokpack.store.dataset import (
    DatasetRecord,
    PartsStream,
    ShardedDataset,
    ShardEntry,
    check_against_shards,
    stream_hashes,
)
from tokpack.store.format import (
    DATASET_FILE,
    META_FILE,
    NPY_HEADER_BYTES,
    STARTS_FILE,
    TOKENS_FILE,
    VOCABULARY_DIR,
    PackMeta,
    npy_header,
)
from tokpack.store.opening import open_tokens
from tokpack.store.reader import Pack, check_ranges
from tokpack.store.source import RecordedStream, TokenSource

#: The cache's default bound: 8 GiB.
DEFAULT_CACHE_BYTES = 8 << 30
_BLOCK = 8 << 20


def is_url(path: str | Path) -> bool:
    """Whether ``path`` is a URL (``s3://…``, ``file://…``) rather than a local path.

    >>> is_url("s3://bucket/data"), is_url("/tmp/data")
    (True, False)
    """
    return "://" in str(path)


def _filesystem(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise InputError("reading URLs needs fsspec", where=url, fix="pip install fsspec (and s3fs for s3://)") from None
    if storage_options is not None and not isinstance(storage_options, dict):
        raise InputError(f"storage_options must be a dict, got {type(storage_options).__name__}", where=url)
    try:
        return url_to_fs(url, **(storage_options or {}))
    except ImportError as error:  # fsspec knows the protocol, but its package is not installed
        raise InputError(f"no file system for this URL ({error})", where=url) from None
    except (ValueError, TypeError) as error:  # "Protocol not known", an option the file system does not take
        raise InputError(f"cannot open ({_first_line(error)})", where=url,
                         fix="check the URL's protocol and storage_options") from None


#: Packages whose exceptions mean the remote store could not be reached or refused us (not a bug).
_STORAGE_PACKAGES = {"botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "adlfs", "huggingface_hub", "requests",
                     "urllib3", "fsspec", "google"}

F = TypeVar("F", bound=Callable[..., Any])


def _storage_errors(url_argument: int) -> Callable[[F], F]:
    """Report a store that cannot be reached or refuses us (no credentials, an unreachable
    endpoint, an option the file system does not take) as an :class:`InputError` naming the URL
    (positional argument ``url_argument``), never as the storage library's exception."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except (TokpackError, FileNotFoundError):
                raise
            except Exception as error:
                package = type(error).__module__.split(".")[0]
                if not (package in _STORAGE_PACKAGES or isinstance(error, (ConnectionError, TimeoutError))
                        or (isinstance(error, TypeError) and "unexpected keyword argument" in str(error))):
                    raise
                url = args[url_argument] if len(args) > url_argument else kwargs.get("url")
                raise InputError(f"cannot reach the store ({type(error).__name__}: {_first_line(error)})", where=url,
                                 fix="check the endpoint, the credentials and storage_options") from None
        return cast(F, wrapper)

    return decorate


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _remote_cache_root(cache_dir: str | Path | None) -> Path:
    base = Path(cache_dir) if cache_dir is not None else Path(os.environ.get("TOKPACK_CACHE") or Path.home() / ".cache" / "tokpack")
    return base / "remote"


class ShardCache:
    """The local copies of shards' ``tokens.npy``, at most ``limit`` bytes, least recently
    touched dropped first (their readers let go of the memory map and fetch again if needed)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: OrderedDict[int, tuple[int, Callable[[], None]]] = OrderedDict()

    @property
    def used(self) -> int:
        """Bytes held now."""
        return sum(size for size, _ in self._held.values())

    def make_room(self, size: int) -> None:
        """Drop the least recently touched copies until ``size`` more bytes fit (one copy always fits)."""
        while self._held and self.used + size > self.limit:
            _, (_, release) = self._held.popitem(last=False)
            release()

    def hold(self, key: int, size: int, release: Callable[[], None]) -> None:
        self._held[key] = (size, release)

    def touch(self, key: int) -> None:
        self._held.move_to_end(key)


class RemoteShard:
    """One pack of a remote dataset: ``starts`` at hand, ``tokens`` fetched and verified when first read."""

    def __init__(self, owner: RemoteDataset, index: int, entry: ShardEntry, folder: str, local: Path) -> None:
        self.owner, self.index, self.entry, self.folder, self.local = owner, index, entry, folder, local
        self.path = local
        self.n_tokens, self.n_docs = entry.n_tokens, entry.n_docs
        local.mkdir(parents=True, exist_ok=True)
        meta_file = owner.fetch_small(self._remote(META_FILE), local / META_FILE)
        self.meta: PackMeta = read_record(PackMeta, meta_file)
        _check_seal(self.meta, owner.url_of(self._remote(META_FILE)))
        if self.meta.vocabulary != owner.meta.vocabulary:
            raise VocabularyMismatch(f"vocabulary {self.meta.vocabulary.short} differs from "
                                     f"the dataset's {owner.meta.vocabulary.short}", where=owner.url_of(self.folder))
        meta = self.meta
        if (meta.n_docs, meta.n_tokens, meta.tokens_sha256, meta.starts_sha256) != (
                entry.n_docs, entry.n_tokens, entry.tokens_sha256, entry.starts_sha256):
            raise IntegrityError(f"does not match its entry in {DATASET_FILE}", where=owner.url_of(self._remote(META_FILE)),
                                 fix="the remote shard was altered or replaced")
        starts_file = owner.fetch_small(self._remote(STARTS_FILE), local / STARTS_FILE)
        starts = np.load(starts_file, allow_pickle=False)
        if starts.dtype != np.dtype("<i8") or starts.shape != (entry.n_docs,) or \
                hashlib.sha256(starts.tobytes()).hexdigest() != entry.starts_sha256:
            starts_file.unlink(missing_ok=True)
            raise IntegrityError("SHA-256 differs from the record", where=owner.url_of(self._remote(STARTS_FILE)),
                                 fix="the remote shard was altered")
        self.starts = starts.astype(np.int64)
        self._tokens: np.ndarray | None = None

    def _remote(self, name: str) -> str:
        return f"{self.folder}/{name}" if self.folder else name

    @property
    def tokens(self) -> np.ndarray:
        """The ids, memory-mapped from the verified local copy (fetched on first use)."""
        if self._tokens is None:
            self._tokens = self.owner.fetch_tokens(self)
        else:
            self.owner.cache.touch(self.index)
        return self._tokens

    def release(self) -> None:
        """Let go of the local copy (the cache is dropping it)."""
        self._tokens = None
        (self.local / TOKENS_FILE).unlink(missing_ok=True)

    def gather_rows(self, origins: np.ndarray, width: int) -> np.ndarray:
        return sliding_window_view(self.tokens, width)[origins]

    def verify(self, *, stream_hash: Any = None) -> None:
        """Download the ids again, whatever the cache holds, check them against the record, and
        feed them to ``stream_hash``: a check of the remote, not of the local copy."""
        self._tokens = None
        tokens = self._tokens = self.owner.fetch_tokens(self, fresh=True)
        if stream_hash is not None:
            for offset in range(0, len(tokens), _BLOCK):
                stream_hash.update(tokens[offset : offset + _BLOCK].tobytes())


class RemoteDataset(PartsStream, RecordedStream):
    """A sharded dataset (``dataset.json``) or a pack (``meta.json``) at ``url``, read as one
    stream through a bounded local cache (see the module docstring)."""

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None, cache_dir: str | Path | None = None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, verify: bool = False) -> None:
        """Raises:
            InputError: neither record at ``url``.
            IntegrityError / VocabularyMismatch: a record, shard or file that does not match.
        """
        self.url = url.rstrip("/")
        self.path = self.url  # a URL, kept as text: Path() would fold its "//"
        self.fs, self.root = _filesystem(self.url, storage_options)
        self.cache = ShardCache(checks.positive_int("cache_bytes", cache_bytes))
        scratch = _remote_cache_root(cache_dir) / "incoming"
        scratch.mkdir(parents=True, exist_ok=True)
        if self.fs.exists(f"{self.root}/{DATASET_FILE}"):
            record_file = self.fetch_small(DATASET_FILE, Path(tempfile.mkdtemp(dir=scratch)) / DATASET_FILE)
            self.meta: Any = read_record(DatasetRecord, record_file)
            entries = [(entry, entry.name) for entry in self.meta.shards]
        elif self.fs.exists(f"{self.root}/{META_FILE}"):
            record_file = self.fetch_small(META_FILE, Path(tempfile.mkdtemp(dir=scratch)) / META_FILE)
            self.meta = read_record(PackMeta, record_file)
            entries = [(ShardEntry(name="pack", n_docs=self.meta.n_docs, n_tokens=self.meta.n_tokens,
                                   tokens_sha256=self.meta.tokens_sha256, starts_sha256=self.meta.starts_sha256), "")]
        else:
            raise InputError(f"neither a pack ({META_FILE}) nor a sharded dataset ({DATASET_FILE})", where=self.url)
        _check_seal(self.meta, self.url_of(record_file.name))
        shutil.rmtree(record_file.parent, ignore_errors=True)
        # The seal names the content: copies of another version never mix with this one's.
        self.local = _remote_cache_root(cache_dir) / self.meta.seal[:32]
        self.shards = [RemoteShard(self, index, entry, folder, self.local / (folder or "pack"))
                       for index, (entry, folder) in enumerate(entries)]
        self.offsets = np.concatenate(([0], np.cumsum([s.n_tokens for s in self.shards]))).astype(np.int64)
        if self.offsets[-1] != self.meta.n_tokens or sum(s.n_docs for s in self.shards) != self.meta.n_docs:
            raise IntegrityError("shard counts do not add up to the dataset's", where=self.url_of(DATASET_FILE))
        self.starts = np.concatenate([s.starts + o for s, o in zip(self.shards, self.offsets)] or [np.zeros(0, np.int64)])
        if isinstance(self.meta, DatasetRecord):
            check_against_shards(self.url_of(DATASET_FILE), self.meta, [s.meta for s in self.shards], self.starts)
        else:
            check_ranges(self.url_of(META_FILE), self.meta.ranges, self.starts, self.meta.n_tokens)
        self.dtype = np.dtype(self.meta.dtype)
        if self.shards:
            self._check_vocabulary(self.shards[0])
        if verify:
            self.verify()

    def _check_vocabulary(self, shard: RemoteShard) -> None:
        """Fetch the vocabulary record and rank file ``shard`` carries (small files) and check
        them as a local pack's are checked (:func:`tokpack.store.carried.check_carried`): they
        are the recorded vocabulary, and the padding id is one of its special tokens. The other
        carried files are for loading the vocabulary elsewhere; they stay remote.

        Raises:
            IntegrityError: naming the remote shard's record.
        """
        from tokpack.vocab.bytelevel import RANKS_FILE, VOCABULARY_FILE

        wanted = {name: digest for name, digest in shard.meta.vocabulary_files.items()
                  if name in (f"{VOCABULARY_DIR}/{VOCABULARY_FILE}", f"{VOCABULARY_DIR}/{RANKS_FILE}")}
        if len(wanted) < 2 or not all(self.fs.exists(f"{self.root}/{shard._remote(name)}") for name in wanted):
            return  # none carried, or a pack uploaded without them: nothing to check against
        folder = shard.local / VOCABULARY_DIR
        shutil.rmtree(folder, ignore_errors=True)
        for name in wanted:
            self.fetch_small(shard._remote(name), shard.local / name)
        try:
            check_carried(Carrier(shard.local, VOCABULARY_DIR, shard.local / META_FILE, "the remote dataset was altered"),
                          wanted, self.meta.vocabulary, shard.meta.pad_id)
        except IntegrityError as error:
            raise IntegrityError(error.what, where=self.url_of(shard._remote(META_FILE)), fix=error.fix) from None

    def url_of(self, relative: str) -> str:
        return f"{self.url}/{relative}"

    def fetch_small(self, relative: str, local: Path) -> Path:
        """Download a small file (a record, a starts index) to ``local``."""
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.fs.get_file(f"{self.root}/{relative}", str(local))
        except FileNotFoundError:
            raise IntegrityError("missing", where=self.url_of(relative), fix="the remote dataset is incomplete") from None
        return local

    def fetch_tokens(self, shard: RemoteShard, *, fresh: bool = False) -> np.ndarray:
        """Download (or, unless ``fresh``, reuse the cached copy of) ``shard``'s ``tokens.npy``,
        verified against the record before use: its SHA-256 and size, every id inside the
        vocabulary, the padding id never in the stream."""
        entry, target = shard.entry, shard.local / TOKENS_FILE
        size = NPY_HEADER_BYTES + entry.n_tokens * self.dtype.itemsize
        # numpy reads the ids from where the file's own header ends: the header must be the one
        # the record implies, or a shorter one and chosen ids would shift the stream past the hash.
        expected_header = npy_header(self.dtype, entry.n_tokens)
        self.cache.make_room(size)
        if fresh or not (target.exists() and _payload_sha256(target, expected_header) == entry.tokens_sha256):
            partial = partial_sibling(target)
            digest = hashlib.sha256()
            remote = self.url_of(shard._remote(TOKENS_FILE))
            try:
                with self.fs.open(f"{self.root}/{shard._remote(TOKENS_FILE)}", "rb") as source, open(partial, "wb") as sink:
                    header = source.read(NPY_HEADER_BYTES)
                    if header != expected_header:
                        raise IntegrityError(f"its .npy header is not the one {DATASET_FILE} implies ({NPY_HEADER_BYTES} "
                                             f"bytes, {self.dtype.name}, {entry.n_tokens:,} ids); refused", where=remote,
                                             fix="the remote shard was altered")
                    sink.write(header)
                    while block := source.read(_BLOCK):
                        digest.update(block)
                        sink.write(block)
            except FileNotFoundError:
                partial.unlink(missing_ok=True)
                raise IntegrityError("missing", where=remote, fix="the remote dataset is incomplete") from None
            except BaseException:  # a dropped connection or an interrupt leaves no partial behind
                partial.unlink(missing_ok=True)
                raise
            if partial.stat().st_size != size or digest.hexdigest() != entry.tokens_sha256:
                partial.unlink(missing_ok=True)
                raise IntegrityError(f"SHA-256 or size differs from {DATASET_FILE}; refused", where=remote,
                                     fix="the remote shard was altered or truncated")
            try:
                self._check_ids(np.load(partial, mmap_mode="r", allow_pickle=False), shard.meta.pad_id, remote)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
            os.replace(partial, target)
        tokens = np.load(target, mmap_mode="r", allow_pickle=False)
        if tokens.dtype != self.dtype.newbyteorder("<") or tokens.shape != (entry.n_tokens,):
            raise IntegrityError(f"holds {tokens.dtype} {tokens.shape}, "
                                 f"the record says {self.dtype.name} ({entry.n_tokens},)", where=self.url_of(shard._remote(TOKENS_FILE)))
        self.cache.hold(shard.index, size, shard.release)
        return tokens

    def _check_ids(self, tokens: np.ndarray, pad_id: int | None, where: str) -> None:
        """Every id inside the vocabulary, the padding id never among them (read in blocks)."""
        step = max(1, _BLOCK // max(tokens.itemsize, 1))
        for offset in range(0, len(tokens), step):
            chunk = tokens[offset : offset + step]
            if len(chunk) and int(chunk.max()) >= self.vocabulary.n_vocab:
                raise IntegrityError(f"id {int(chunk.max())} outside the vocabulary (n_vocab {self.vocabulary.n_vocab})", where=where)
            if pad_id is not None and bool(np.any(chunk == pad_id)):
                raise IntegrityError(f"the padding id {pad_id} occurs as a real token", where=where)

    def verify(self) -> None:
        """Download every shard again (one at a time, within the cache; a cached copy is not
        trusted) and check it, then the whole stream's checksums.

        Raises:
            IntegrityError: naming the remote file that does not match.
        """
        tokens_sha, starts_sha = stream_hashes(self.shards, verify=True)
        if (tokens_sha, starts_sha) != (self.meta.tokens_sha256, self.meta.starts_sha256):
            raise IntegrityError("the stream's checksums differ from the record", where=self.url_of(DATASET_FILE))

    def check_stream(self) -> None:
        """Hash the whole stream and its starts against the record, each shard read through the
        cache (fetched and checked against its entry where not already there).

        Raises:
            IntegrityError: the record's checksums are not those of its shards' ids.
        """
        if stream_hashes(self.shards) != (self.meta.tokens_sha256, self.meta.starts_sha256):
            record = DATASET_FILE if isinstance(self.meta, DatasetRecord) else META_FILE
            raise IntegrityError("the stream's checksums differ from the record", where=self.url_of(record),
                                 fix="the remote record was edited")

    @property
    def verified_what(self) -> str:
        """What :meth:`verify` checks, in words (``tokpack inspect`` prints it)."""
        return "checksums verified: every shard downloaded again from the remote, whatever the cache held"

    def __repr__(self) -> str:
        return f"RemoteDataset({self.url!r}, shards={len(self.shards)}, n_tokens={self.n_tokens})"


def _check_seal(record: Any, where: str) -> None:
    if record.seal != record.computed_seal():
        raise IntegrityError("edited after it was written (seal mismatch)", where=where, fix="the remote record was altered")


def _payload_sha256(path: Path, header: bytes) -> str | None:
    """The SHA-256 of a cached copy's ids, or ``None`` when its header is not ``header`` (numpy
    would read the ids from elsewhere than the bytes hashed)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if handle.read(NPY_HEADER_BYTES) != header:
            return None
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


@_storage_errors(0)
def open_remote(url: str, *, storage_options: dict[str, Any] | None = None, cache_dir: str | Path | None = None,
                cache_bytes: int = DEFAULT_CACHE_BYTES, verify: bool = False) -> RemoteDataset:
    """Open the pack or sharded dataset at ``url`` (see :class:`RemoteDataset`)."""
    return RemoteDataset(url, storage_options=storage_options, cache_dir=cache_dir, cache_bytes=cache_bytes, verify=verify)


def open_local_or_remote(path: str | Path, *, storage_options: dict[str, Any] | None = None, verify: bool | None = False,
                **cache: Any) -> TokenSource:
    """Open a pack or sharded dataset, local or at a URL (``verify``: as :func:`open_tokens`'s;
    a remote dataset checks each shard as it downloads, and ``True`` fetches and checks all now)."""
    if is_url(path):
        return cast(TokenSource, open_remote(str(path), storage_options=storage_options, verify=bool(verify), **cache))
    return open_tokens(Path(path), verify=verify)


@_storage_errors(1)
def upload(local: Path, url: str, *, storage_options: dict[str, Any] | None = None, last: tuple[str, ...] = ()) -> None:
    """Copy the folder (or file) ``local`` to ``url``, the names in ``last`` after everything
    else, and check every uploaded size.

    Raises:
        InputError: something exists at ``url`` already.
        IntegrityError: an uploaded file's size differs from the local one.
    """
    fs, root = _filesystem(url, storage_options)
    _upload(fs, Path(local), root, url, set(), last=last)


def _upload(fs: Any, local: Path, root: str, url: str, made: set[str], *, last: tuple[str, ...] = ()) -> None:
    """:func:`upload` through the file system ``fs`` (one client for every file of a dataset),
    making each folder not in ``made`` and adding it there: on object storage each makedirs is a
    request (the bucket's HEAD), so a dataset's uploads share one ``made``."""
    files = sorted(p for p in local.rglob("*") if p.is_file()) if local.is_dir() else [local]
    base = local if local.is_dir() else local.parent
    ordered = [p for p in files if p.name not in last] + [p for name in last for p in files if p.name == name]
    for file in ordered:
        relative = file.relative_to(base).as_posix()
        target = f"{root}/{relative}" if local.is_dir() else root
        folder = target.rsplit("/", 1)[0]
        if folder not in made:
            fs.makedirs(folder, exist_ok=True)
            made.add(folder)
        fs.put_file(str(file), target)
        if fs.info(target)["size"] != file.stat().st_size:
            raise IntegrityError("uploaded size differs from the local file", where=f"{url}/{relative}" if local.is_dir() else url,
                                 fix="upload again")


@_storage_errors(1)
def upload_dataset(local: Path, url: str, *, storage_options: dict[str, Any] | None = None) -> None:
    """Verify the local pack or sharded dataset, upload it, and write its record last, so a
    half-uploaded dataset never opens.

    Raises:
        InputError: ``url`` holds something already.
        IntegrityError: the local data does not match its record.
    """
    local = Path(local)
    opened = open_tokens(local, verify=True)
    record = DATASET_FILE if isinstance(opened, ShardedDataset) else META_FILE
    fs, root = _filesystem(url, storage_options)
    if fs.exists(f"{root}/{record}"):
        raise InputError(f"already holds a {record}; a dataset is never overwritten", where=url)
    url, root, made = url.rstrip("/"), root.rstrip("/"), set[str]()
    if isinstance(opened, ShardedDataset):  # the listed shards only (no job files, locks or markers)
        for entry in opened.meta.shards:
            _upload(fs, local / entry.name, f"{root}/{entry.name}", f"{url}/{entry.name}", made, last=(META_FILE,))
    else:  # the arrays and the vocabulary files the pack carries (no stray files)
        assert isinstance(opened, Pack)
        for name in (TOKENS_FILE, STARTS_FILE, *opened.meta.vocabulary_files):
            _upload(fs, local / name, f"{root}/{name}", f"{url}/{name}", made)
    _upload(fs, local / record, f"{root}/{record}", f"{url}/{record}", made)


@_storage_errors(2)
def export_to_url(write: Callable[..., Any], source: TokenSource, url: str, options: Any, progress: Callable[[int], None],
                  storage_options: dict[str, Any]) -> Any:
    """Export locally, verify, upload, the sidecar last (see :func:`tokpack.store.exporting.export`)."""
    from tokpack.store.sidecar import SIDECAR

    fs, root = _filesystem(url, storage_options)
    name = root.rstrip("/").rsplit("/", 1)[-1]
    if fs.exists(root) or fs.exists(root + ".idx") or fs.exists(root + ".tokpack.json"):
        raise InputError("already exists; an export is never overwritten", where=url)
    with tempfile.TemporaryDirectory(prefix="tokpack-export-") as scratch:
        local = Path(scratch) / name
        record = write(source, local, options, progress)
        _verify_export(local if local.is_dir() else local.parent, record)
        if local.is_dir():
            _upload(fs, local, root, url, set(), last=(SIDECAR,))
        else:
            parent, parent_root = url.rstrip("/").rsplit("/", 1)[0], root.rstrip("/").rsplit("/", 1)[0]
            # Megatron: every part's data and index (OUT, OUT_validation, …), then the sidecar.
            files = [file for part in record.parts.values() for file in part.files]
            files += [file for file in record.files_sha256 if file not in files] + [f"{name}.tokpack.json"]
            made: set[str] = set()
            for file in files:  # the vocabulary's files (OUT.vocabulary/NAME) among them
                _upload(fs, local.parent / file, f"{parent_root}/{file}", f"{parent}/{file}", made)
    return record


def _verify_export(folder: Path, record: Any) -> None:
    """Every file the sidecar lists is there, with the SHA-256 it records."""
    from tokpack.store.sidecar import check_files

    for part in record.parts.values():
        for file in part.files:
            if not (folder / file).exists():
                raise IntegrityError("missing after export", where=folder / file)
    check_files(record, folder)


__all__ = ["DEFAULT_CACHE_BYTES", "RemoteDataset", "ShardCache", "export_to_url", "is_url", "open_remote",
           "open_local_or_remote", "upload", "upload_dataset"]
