"""Layouts on a real corpus: which ids each serves, how often, and where rows start."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokpack
from tokpack.errors import InputError
from tokpack.serve import LAYOUTS, make_layout
from tokpack.serve import layouts as layouts_module
from tokpack.serve.memory import pack_of_documents
from tokpack.store import open_tokens

# (document_bytes, length): long documents cut into many rows, and short ones packed several a row.
SHAPES = [(4096, 64), (256, 128)]


@pytest.fixture(scope="module", params=SHAPES, ids=lambda shape: f"doc{shape[0]}-len{shape[1]}")
def polish(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The bundled Polish sample prepared with a 512-id vocabulary, and a row length."""
    document_bytes, length = request.param
    corpus = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path_factory.mktemp("cache"), vocab_size=512,
                             document_bytes=document_bytes)
    return corpus.tokens_dir, length


def target_counts(layout: layouts_module.Layout) -> np.ndarray:
    """How many times each stream position is a target (a label) over one epoch of ``layout``."""
    positions = layout.positions(np.arange(layout.n_rows))
    targets = positions[:, 1:]
    return np.bincount(targets[targets >= 0], minlength=layout.source.n_tokens)


def check_rows_match_the_stream(layout: layouts_module.Layout) -> None:
    """Ids are the stream's at their positions, padding elsewhere; segment starts are exactly the
    row starts, the breaks in position and the document starts."""
    rows = np.arange(layout.n_rows)
    ids, starts = layout.rows(rows)
    positions = layout.positions(rows)
    tokens = np.asarray(layout.source.tokens)
    real = positions >= 0
    assert np.array_equal(ids[real], tokens[positions[real]])
    assert (ids[~real] == layout.fill).all()
    expected = np.zeros_like(starts)
    expected[:, 0] = True
    broken = positions[:, 1:] != positions[:, :-1] + 1
    first_pad = (positions[:, 1:] < 0) & (positions[:, :-1] >= 0)
    at_document = np.isin(positions[:, 1:], layout.source.starts)
    expected[:, 1:] = (broken & (positions[:, 1:] >= 0)) | first_pad | at_document
    assert np.array_equal(starts, expected)


def test_stream_makes_every_id_but_the_first_a_target_exactly_once(polish: tuple[Path, int]) -> None:
    pack, length = polish
    layout = make_layout("stream", pack, length=length)
    counts = target_counts(layout)
    assert counts[layout.lo] == 0 and (counts[layout.lo + 1 : layout.hi] == 1).all()
    assert counts.sum() == layout.hi - layout.lo - 1  # nothing outside the range, no validation id
    check_rows_match_the_stream(layout)


def test_documents_serves_every_id_and_reports_its_repetition(polish: tuple[Path, int]) -> None:
    pack, length = polish
    layout = make_layout("documents", pack, length=length)
    counts = target_counts(layout)
    assert counts[layout.lo] == 0 and (counts[layout.lo + 1 : layout.hi] >= 1).all()
    assert counts.sum() == counts[layout.lo + 1 : layout.hi].sum()  # nothing outside the range
    assert layout.stats["repetition"] == pytest.approx(counts.sum() / (layout.hi - layout.lo - 1), rel=1e-12)
    assert layout.stats["repetition"] > 1  # run-ons really repeat ids on this corpus
    pieces = layout.positions(np.arange(layout.n_rows))[:, 0]
    documents = layout.source.starts[layout.first_doc : layout.last_doc]
    owner = documents[np.searchsorted(documents, pieces, side="right") - 1]
    assert ((pieces - owner) % length == 0).all()  # at a document start or a row-sized step into one
    check_rows_match_the_stream(layout)


def test_bestfit_starts_rows_at_documents_and_loses_nothing_but_what_it_reports(polish: tuple[Path, int]) -> None:
    pack, length = polish
    layout = make_layout("bestfit", pack, length=length, cache=False)
    width = length + 1
    positions = layout.positions(np.arange(layout.n_rows))
    served = positions[positions >= 0]
    assert np.array_equal(np.sort(served), np.arange(layout.lo, layout.hi))  # every id once, none twice
    documents = layout.source.starts[layout.first_doc : layout.last_doc]
    lengths = np.diff(np.append(documents, layout.hi))
    owner = np.searchsorted(documents, positions[:, 0], side="right") - 1
    assert ((positions[:, 0] - documents[owner]) % width == 0).all()  # a document start, or a cut
    stats = layout.stats
    assert stats["padding_share"] == pytest.approx((positions < 0).sum() / positions.size, rel=1e-12)
    assert stats["cut_share"] == pytest.approx(lengths[lengths > width].sum() / (layout.hi - layout.lo), rel=1e-12)
    # Ids never a target after the id before them in the stream: only the first id of a document or
    # of a cut piece (unless best fit happened to place it right after its predecessor).
    targets = np.zeros(layout.source.n_tokens, dtype=bool)
    labels = positions[:, 1:]
    targets[labels[labels == positions[:, :-1] + 1]] = True
    untargeted = np.flatnonzero(~targets[layout.lo : layout.hi]) + layout.lo
    piece_heads = np.concatenate([np.arange(s, s + n, width) for s, n in zip(documents, lengths)])
    assert np.isin(untargeted, piece_heads).all() and len(untargeted) >= 0.9 * len(piece_heads)
    check_rows_match_the_stream(layout)
    assert layout.n_rows * width < (layout.hi - layout.lo) * 1.5  # best fit packs tightly


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), min_size=2, max_size=60), length=st.integers(1, 12),
       lookahead=st.integers(1, 8))
def test_bestfit_places_every_id_once_for_any_documents(lengths: list[int], length: int, lookahead: int) -> None:
    documents, next_id = [], 1
    for n in lengths:
        documents.append([(next_id + i) % 90 + 1 for i in range(n)])
        next_id += n
    with tempfile.TemporaryDirectory() as folder:
        check_every_layout(pack_of_documents(documents, n_vocab=100, pad_id=0, directory=Path(folder) / "p"),
                           sum(lengths), length, lookahead)


def check_every_layout(pack: Path, n_ids: int, length: int, lookahead: int) -> None:
    layout = make_layout("bestfit", pack, length=length, lookahead=lookahead, cache=False)
    positions = layout.positions(np.arange(layout.n_rows))
    assert np.array_equal(np.sort(positions[positions >= 0]), np.arange(n_ids))
    # a later row never starts before an older piece that was still waiting: the look-ahead bounds the delay
    heads = positions[:, 0]
    assert (np.diff(heads) > 0).all()
    check_rows_match_the_stream(layout)
    for name in ("stream", "documents"):
        other = make_layout(name, pack, length=length)
        counts = target_counts(other)
        assert (counts[1:] >= 1).all() and counts[0] == 0
        check_rows_match_the_stream(other)


def test_bestfit_index_is_cached_by_checksums_and_parameters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pack = pack_of_documents([[1, 2, 3], [4, 5], [6, 7, 8, 9]] * 20, n_vocab=10, pad_id=0, directory=tmp_path / "pack")
    before = sorted(p.name for p in pack.iterdir())
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "cache"))
    first = make_layout("bestfit", pack, length=5)
    assert len(list((tmp_path / "cache" / "layouts").iterdir())) == 1
    assert sorted(p.name for p in pack.iterdir()) == before  # nothing written into the user's data

    def refuse(*args: object) -> None:
        raise AssertionError("rebuilt an index that was cached")

    monkeypatch.setattr(layouts_module, "_best_fit", refuse)
    again = make_layout("bestfit", pack, length=5)
    assert np.array_equal(again.rows(np.arange(again.n_rows))[0], first.rows(np.arange(first.n_rows))[0])
    assert again.stats == first.stats
    with pytest.raises(AssertionError, match="rebuilt"):
        make_layout("bestfit", pack, length=5, lookahead=3)  # other parameters: another index


def test_layout_fingerprint_names_the_data_and_parameters(tmp_path: Path) -> None:
    pack = pack_of_documents([[1, 2, 3, 4]] * 5, n_vocab=10, pad_id=0, directory=tmp_path / "a")
    other = pack_of_documents([[1, 2, 3, 5]] * 5, n_vocab=10, pad_id=0, directory=tmp_path / "b")
    a = make_layout("stream", pack, length=3).fingerprint
    assert a == make_layout("stream", open_tokens(pack), length=3).fingerprint
    assert a != make_layout("stream", other, length=3).fingerprint
    assert a != make_layout("stream", pack, length=2).fingerprint
    assert a["data"]["tokens_sha256"] == open_tokens(pack).meta.tokens_sha256


def test_bad_layout_arguments_are_input_errors(tmp_path: Path) -> None:
    pack = pack_of_documents([[1, 2, 3, 4]], n_vocab=10, pad_id=0, directory=tmp_path / "p")
    assert set(LAYOUTS) == {"stream", "documents", "bestfit"}
    with pytest.raises(InputError, match="unknown layout 'best'"):
        make_layout("best", pack, length=3)
    with pytest.raises(InputError, match="length must be a positive integer"):
        make_layout("stream", pack, length=0)
    with pytest.raises(InputError, match="no 'validation' range"):
        make_layout("stream", pack, length=3, split="validation")
    padless = make_layout("stream", pack_of_documents([[1, 2]], n_vocab=10, directory=tmp_path / "q"), length=3)
    assert (padless.pad_id, padless.fill, padless.ignore_index) == (None, 0, -100)
    with pytest.raises(InputError, match="lookahead"):
        make_layout("bestfit", pack, length=3, lookahead=0, cache=False)


def _best_fit_reference(lengths: list[int], width: int, lookahead: int) -> tuple[list[int], list[int], int]:
    """The first, plain implementation of the best-fit packing (a sorted buffer of
    ``(length, -index)``, an age queue): the fast one must give the same rows."""
    import bisect
    from collections import deque

    waiting: list[tuple[int, int]] = []
    oldest: deque[int] = deque()
    taken = bytearray(len(lengths))
    placed: list[int] = []
    row_ptr = [0]
    following = moved = n_waiting = 0
    while following < len(lengths) or n_waiting:
        while following < len(lengths) and n_waiting < lookahead:
            if lengths[following] < width:
                bisect.insort(waiting, (lengths[following], -following))
            oldest.append(following)
            following += 1
            n_waiting += 1
        while taken[oldest[0]]:
            oldest.popleft()
        head = oldest.popleft()
        taken[head] = 1
        placed.append(head)
        n_waiting -= 1
        space = width - lengths[head]
        if space:
            del waiting[bisect.bisect_left(waiting, (lengths[head], -head))]
        while space and waiting:
            at = bisect.bisect_right(waiting, (space, 1)) - 1
            if at < 0:
                break
            size, index = waiting.pop(at)
            index = -index
            while taken[oldest[0]]:
                oldest.popleft()
            if oldest[0] != index:
                moved += size
            taken[index] = 1
            placed.append(index)
            n_waiting -= 1
            space -= size
        row_ptr.append(len(placed))
    return placed, row_ptr, moved


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 40), st.integers(1, 12), st.data())
def test_best_fit_packs_as_the_plain_sorted_buffer_does(width: int, lookahead: int, data: st.DataObject) -> None:
    from tokpack.serve.layouts import _best_fit

    lengths = data.draw(st.lists(st.integers(1, width), max_size=120))
    placed, row_ptr, moved = _best_fit(np.array(lengths, dtype=np.int64), width, lookahead)
    assert (placed.tolist(), row_ptr.tolist(), moved) == _best_fit_reference(lengths, width, lookahead)
