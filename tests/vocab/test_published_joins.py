"""The last joins shipped for published vocabularies (``tokpack/vocab/published_joins/``): each is
what the rank rule derives from its published rank file (PyPI's ``bpe-openai`` carries cl100k's
and o200k's), a ``tokenizer.json`` made with them is byte for byte the derived one, and a damaged
shipped file is not used.

``python tests/vocab/test_published_joins.py`` writes the shipped files again from those rank files.
"""

from __future__ import annotations

import gzip
import hashlib
import sys
import zlib
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from tokpack.vocab import compiled, published
from tokpack.vocab.loading import load_vocabulary
from tokpack.vocab.merge_files import _last_merges, _table_in_rank_order, tokenizer_json_bytes
from tokpack.vocab.published import JOINS_FILES, JOINS_FOLDER, PUBLISHED, published_last_joins
from tokpack.vocab.rank_files import parse_rank_table

NAMES = {"cl100k_base.joins": "cl100k_base", "o200k_base.joins": "o200k_base"}


def rank_text(name: str) -> bytes:
    return gzip.decompress(resources.files("bpe_openai.data").joinpath(f"{name}.tiktoken.gz").read_bytes())


def derived_joins(text: bytes) -> np.ndarray:
    tokens, order = _table_in_rank_order(parse_rank_table(text, where="ranks")[0])
    joins = _last_merges(tokens, order, None)
    assert joins is not None
    return joins


def test_every_shipped_file_is_named_for_a_published_vocabulary() -> None:
    assert set(JOINS_FILES) <= set(PUBLISHED)
    assert sorted(JOINS_FILES.values()) == sorted(path.name for path in JOINS_FOLDER.iterdir()) == sorted(NAMES)
    assert all(PUBLISHED[digest].name == NAMES[name] for digest, name in JOINS_FILES.items())


@pytest.mark.parametrize("file", sorted(NAMES))
def test_the_shipped_joins_are_the_derived_ones(file: str) -> None:
    text = rank_text(NAMES[file])
    digest = hashlib.sha256(text).hexdigest()
    assert JOINS_FILES[digest] == file
    table = parse_rank_table(text, where="ranks")[0]
    shipped = published_last_joins(digest, table.lengths())
    assert shipped is not None
    np.testing.assert_array_equal(shipped, derived_joins(text))


@pytest.mark.parametrize("file", sorted(NAMES))
def test_a_published_vocabularys_tokenizer_json_is_made_with_them_and_is_the_derived_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file: str) -> None:
    ranks = tmp_path / "ranks.tiktoken"
    ranks.write_bytes(rank_text(NAMES[file]))
    tokenizer = load_vocabulary(ranks)
    table = tokenizer.__dict__["_table"]
    derived = tokenizer_json_bytes(table, tokenizer.pattern, dict(tokenizer.special_tokens))

    def no_derivation(*args: object) -> None:
        raise AssertionError("derived the joins of a published vocabulary")

    monkeypatch.setattr(compiled, "last_joins", no_derivation)
    monkeypatch.setattr(compiled, "table_last_joins", no_derivation)
    assert tokenizer.tokenizer_json_bytes() == derived


def test_a_damaged_shipped_file_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = rank_text("cl100k_base")
    digest = hashlib.sha256(text).hexdigest()
    lengths = parse_rank_table(text, where="ranks")[0].lengths()
    joins = zlib.decompress((JOINS_FOLDER / JOINS_FILES[digest]).read_bytes())
    monkeypatch.setattr(published, "JOINS_FOLDER", tmp_path)
    damaged = {
        "short": joins[:-1],
        "a single byte cut": b"\x01" + joins[1:],
        "a cut at the token's end": joins[:-1] + bytes([int(lengths[-1])]),
        "a token not cut": joins[:-1] + b"\x00",
    }
    for what, data in damaged.items():
        (tmp_path / JOINS_FILES[digest]).write_bytes(zlib.compress(data))
        assert published_last_joins(digest, lengths) is None, what
    (tmp_path / JOINS_FILES[digest]).write_bytes(b"not zlib")
    assert published_last_joins(digest, lengths) is None
    (tmp_path / JOINS_FILES[digest]).unlink()
    assert published_last_joins(digest, lengths) is None


def write_shipped_files() -> None:
    """Write every shipped file again from the published rank file it is named for."""
    for file, name in NAMES.items():
        joins = derived_joins(rank_text(name))
        assert int(joins.max()) < 256
        (JOINS_FOLDER / file).write_bytes(zlib.compress(joins.astype(np.uint8).tobytes(), 9))
        print(f"{JOINS_FOLDER / file}: {len(joins):,} tokens")


if __name__ == "__main__":
    write_shipped_files()
    sys.exit(0)
