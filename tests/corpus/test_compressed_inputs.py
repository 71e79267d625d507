"""Compressed corpora (gzip, zstd, bz2, xz), told by their bytes, are read as their text: a text
file, JSON Lines and a folder's files give the ids of their decompressed selves; a damaged one
says so; a binary file is named as binary, not given the advice for text in another encoding."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zstandard
from typer.testing import CliRunner

from tokpack import prepare
from tokpack._compressed import compression_of, decompress_into, file_compression
from tokpack.cli import app
from tokpack.errors import InputError
from tokpack.store.origins import read_origins

from conftest import DATA

COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gz": gzip.compress, "zst": zstandard.ZstdCompressor().compress, "bz2": bz2.compress, "xz": lzma.compress,
}


@pytest.fixture(scope="module")
def text() -> bytes:
    return b"".join(path.read_bytes() for path in sorted((DATA / "polish" / "narrative").glob("*.txt"))[:6])


def _ids(corpus: Path, cache: Path, **options: object) -> tuple[np.ndarray, np.ndarray, str]:
    prepared = prepare(corpus, cache_dir=cache, vocab_size=300, document_bytes=2048, **options)  # type: ignore[arg-type]
    pack = prepared.pack()
    return np.asarray(pack.tokens).copy(), np.asarray(pack.starts).copy(), prepared.identity.sha256


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_compressed_text_file_gives_the_ids_of_its_text(suffix: str, text: bytes, tmp_path: Path) -> None:
    plain = tmp_path / "x.txt"
    plain.write_bytes(text)
    packed = tmp_path / f"x.txt.{suffix}"
    packed.write_bytes(COMPRESS[suffix](text))
    tokens, starts, vocabulary = _ids(plain, tmp_path / "cache")
    got_tokens, got_starts, got_vocabulary = _ids(packed, tmp_path / "cache")
    # The same vocabulary is trained (the sample is the same text) and the same ids come out.
    assert got_vocabulary == vocabulary
    assert np.array_equal(got_tokens, tokens) and np.array_equal(got_starts, starts)
    # Each document's origin names the compressed file and bytes of its text.
    record, rows = read_origins(prepare(packed, cache_dir=tmp_path / "cache", vocab_size=300, document_bytes=2048).pack())  # type: ignore[misc]
    assert record.files == [packed.name]
    assert len(rows) == len(starts) and b"".join(text[start:end] for _, start, end in rows.tolist()) == text


def test_compression_is_told_by_the_bytes_and_splits_cut_the_text(text: bytes, tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_bytes(text)
    hidden = tmp_path / "hidden.txt"  # gzip under a plain name
    hidden.write_bytes(gzip.compress(text))
    tokens, _, _ = _ids(plain, tmp_path / "cache")
    assert np.array_equal(_ids(hidden, tmp_path / "cache")[0], tokens)
    # A held-out split of a compressed file cuts its text: the same ranges as the plain file's.
    plain_split = prepare(plain, cache_dir=tmp_path / "cache", vocab_size=300, document_bytes=2048, validation=0.2)
    hidden_split = prepare(hidden, cache_dir=tmp_path / "cache", vocab_size=300, document_bytes=2048, validation=0.2)
    ranges = json.loads((tmp_path / "hidden.txt.manifest.json").read_text())["ranges"]
    assert ranges == json.loads((tmp_path / "plain.txt.manifest.json").read_text())["ranges"]
    assert ranges["validation"][1] == len(text)
    assert hidden_split.meta.ranges == plain_split.meta.ranges
    assert hidden_split.meta.source.sha256 == plain_split.meta.source.sha256  # the text's identity


def test_compressed_json_lines_and_folder_files_are_read_as_their_text(text: bytes, tmp_path: Path) -> None:
    lines = text.decode().splitlines(keepends=True)
    records = "".join(json.dumps({"text": "".join(lines[i : i + 7])}) + "\n" for i in range(0, len(lines), 7)).encode()
    (tmp_path / "r.jsonl").write_bytes(records)
    (tmp_path / "r.jsonl.zst").write_bytes(COMPRESS["zst"](records))
    assert np.array_equal(_ids(tmp_path / "r.jsonl.zst", tmp_path / "cache")[0], _ids(tmp_path / "r.jsonl", tmp_path / "cache")[0])

    plain, packed = tmp_path / "plain", tmp_path / "packed"
    plain.mkdir()
    packed.mkdir()
    for index, (name, compress) in enumerate(COMPRESS.items()):
        part = text[index * 2000 : (index + 1) * 2000 + 1000].decode(errors="ignore").encode()
        (plain / f"{index}.txt").write_bytes(part)
        (packed / f"{index}.txt.{name}").write_bytes(compress(part))
    assert np.array_equal(_ids(packed, tmp_path / "cache")[0], _ids(plain, tmp_path / "cache")[0])


def test_a_truncated_or_damaged_compressed_file_says_so(text: bytes, tmp_path: Path) -> None:
    for suffix in sorted(COMPRESS):
        cut = tmp_path / f"cut.txt.{suffix}"
        cut.write_bytes(COMPRESS[suffix](text)[:-40])
        with pytest.raises(InputError, match=f"{cut}: .*cannot be decompressed: its .* stream .*; the file was cut short or "
                                             "damaged; copy or download it again"):
            prepare(cut, cache_dir=tmp_path / "cache", vocab_size=300)


def test_a_multi_frame_zstd_file_is_read_whole(text: bytes, tmp_path: Path) -> None:
    plain, frames = tmp_path / "x.txt", tmp_path / "frames.txt.zst"
    plain.write_bytes(text)
    half = len(text) // 2
    frames.write_bytes(COMPRESS["zst"](text[:half]) + COMPRESS["zst"](text[half:]))
    assert np.array_equal(_ids(frames, tmp_path / "cache")[0], _ids(plain, tmp_path / "cache")[0])


def test_binary_inputs_are_named_as_binary_with_the_fix(text: bytes, tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_bytes(text[:3000])
    shutil.copyfile("/bin/sh" if Path("/bin/sh").is_file() else "/usr/bin/env", folder / "tool")
    runner = CliRunner()
    result = runner.invoke(app, ["prepare", str(folder), "--vocab-size", "300", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert f"{folder / 'tool'}: is an executable or shared library (ELF), not text" in line and "iconv" not in line
    assert "move it out of the corpus" in line

    (folder / "tool").unlink()
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a", "b"]}), folder / "rows.parquet.bak")
    with pytest.raises(InputError, match=r"rows.parquet.bak: is a Parquet file, not text; give a Parquet file as the corpus"):
        prepare(folder, cache_dir=tmp_path / "c", vocab_size=300)
    # Skipped whole with on_error="skip", and the count says why.
    skipped = prepare(folder, cache_dir=tmp_path / "c", vocab_size=300, on_error="skip")
    assert skipped.meta.counts["skipped"] == 1

    utf16 = tmp_path / "windows.txt"
    utf16.write_bytes(text[:1000].decode().encode("utf-16"))
    with pytest.raises(InputError, match="is UTF-16 text .*; convert it to UTF-8 \\(e.g. iconv -f utf-16 -t utf-8\\)"):
        prepare(utf16, cache_dir=tmp_path / "c", vocab_size=300)
    # Text in another 8-bit encoding keeps the iconv advice, with the offset.
    latin = tmp_path / "latin.txt"
    latin.write_bytes("zażółć".encode("iso8859_2"))
    with pytest.raises(InputError, match="invalid UTF-8 at byte 2; convert it to UTF-8 \\(e.g. iconv"):
        prepare(latin, cache_dir=tmp_path / "c", vocab_size=300)


def _damaged_at(data: bytes, offset: int) -> bytes:
    changed = bytearray(data)
    changed[offset] ^= 0xFF
    return bytes(changed)


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
@pytest.mark.parametrize("offset", [1, 3])
def test_a_damaged_later_stream_is_refused_not_dropped(suffix: str, offset: int, text: bytes, tmp_path: Path) -> None:
    # bz2 and xz readers take what follows a complete stream for trailing garbage and stop there:
    # the text of every later stream would be lost without a word.
    half = len(text) // 2
    damaged = tmp_path / f"x.txt.{suffix}"
    damaged.write_bytes(COMPRESS[suffix](text[:half]) + _damaged_at(COMPRESS[suffix](text[half:]), offset))
    with pytest.raises(InputError, match=f"{damaged}: byte [0-9,]+: cannot be decompressed: its .* stream .*; the file was cut "
                                         "short or damaged; copy or download it again"):
        decompress_into(damaged, io.BytesIO())


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_bytes_after_the_last_stream_are_refused_and_zero_padding_is_read(suffix: str, text: bytes, tmp_path: Path) -> None:
    padded, trailing = tmp_path / f"padded.txt.{suffix}", tmp_path / f"trailing.txt.{suffix}"
    padded.write_bytes(COMPRESS[suffix](text) + b"\x00" * 8)  # tape padding, as gzip and xz read it
    trailing.write_bytes(COMPRESS[suffix](text) + b"appended text")
    out = io.BytesIO()
    assert decompress_into(padded, out)[1] == len(text) and out.getvalue() == text
    with pytest.raises(InputError, match=f"{trailing}: byte [0-9,]+: cannot be decompressed"):
        decompress_into(trailing, io.BytesIO())


def test_text_that_opens_like_a_bz2_file_is_read_as_text(text: bytes, tmp_path: Path) -> None:
    # "BZh" alone is how some text begins; a bz2 stream goes on with a block size digit and a
    # block (or end-of-stream) magic number.
    corpus = tmp_path / "notes.txt"
    corpus.write_bytes(b"BZh is a prefix that bzip2 also writes.\n" + text)
    assert file_compression(corpus) is None
    assert compression_of(bz2.compress(b"")) == "bz2" and compression_of(bz2.compress(b"text")) == "bz2"
    prepared = prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=300)
    assert len(prepared.pack().starts) >= 1


class _LargestWrite(io.RawIOBase):
    def __init__(self) -> None:
        self.largest = self.total = 0

    def write(self, block: bytes) -> int:  # type: ignore[override]
        self.largest, self.total = max(self.largest, len(block)), self.total + len(block)
        return len(block)


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_compression_bomb_is_decompressed_with_flat_memory(suffix: str, tmp_path: Path) -> None:
    # 256 MiB of one byte is 8 KiB of zstd (128 KiB per 4-byte block): held whole, a 1 MiB file
    # of it would need 32 GiB.
    bomb = tmp_path / f"bomb.txt.{suffix}"
    size = 256 << 20 if suffix == "zst" else 8 << 20  # the others' readers are asked for 1 MiB at a time
    compress = zstandard.ZstdCompressor(level=1).compress if suffix == "zst" else COMPRESS[suffix]
    bomb.write_bytes(compress(b"a" * size))
    sink = _LargestWrite()
    assert decompress_into(bomb, sink)[1] == size == sink.total  # type: ignore[arg-type]
    assert sink.largest <= (32 << 20 if suffix == "zst" else 1 << 20)
