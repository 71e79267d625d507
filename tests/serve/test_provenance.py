"""Provenance: ``provenance(step)`` says what every served row holds and where it came from, and
``when(part, document)`` is its exact inverse, computed without serving; across layouts,
mixtures, a world-size and global-batch change at a resume, and weights changed there.

The positional packs hold id ``offset + i`` at position ``i`` (documents of uneven lengths), so a
row rebuilt from the positions provenance names is checked against the row served.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import tokpack
from tokpack.chess.jobs.pack import pack_games
from tokpack.chess.pgn.games import games_table, read_games_strictly
from tokpack.chess.schemes import make_encoder
from tokpack.errors import InputError, IntegrityError
from tokpack.serve import Mixture, PackedBatches
from tokpack.serve.memory import pack_of_documents
from tokpack.store import Pack, open_tokens

FIXTURES = Path(__file__).parents[1] / "fixtures"
LENGTH = 16
OFFSETS = {"a": 1, "b": 10_001, "c": 20_001}
LAYOUTS = ("stream", "documents", "bestfit")


def positional(folder: Path, name: str, n_docs: int, seed: int) -> Path:
    """Documents of 1 to 60 ids whose id at stream position ``i`` is ``OFFSETS[name] + i``."""
    lengths = np.random.default_rng(seed).integers(1, 60, n_docs)
    ends = np.cumsum(lengths)
    ids = np.arange(OFFSETS[name], OFFSETS[name] + int(ends[-1]))
    documents = [ids[end - n : end].tolist() for n, end in zip(lengths, ends)]
    return pack_of_documents(documents, n_vocab=30_000, pad_id=0, directory=folder / name)


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("provenance")
    return {"a": positional(folder, "a", 120, 1), "b": positional(folder, "b", 30, 2), "c": positional(folder, "c", 60, 3)}


def mixture(packs: dict[str, Path], weights: dict[str, float]) -> Mixture:
    return Mixture([(packs[name], weight) for name, weight in weights.items()], seed=7)


def loader(packs: dict[str, Path], weights: dict[str, float], layout: str, global_batch: int, **ranks: int) -> PackedBatches:
    options = {"cache": False} if layout == "bestfit" else None
    return PackedBatches(mixture(packs, weights), layout=layout, length=LENGTH, global_batch=global_batch, seed=3,
                         layout_options=options, **ranks)


def rebuilt(batches: PackedBatches, segments: list[dict]) -> list[int]:
    """A row's ``length + 1`` ids, read from the positions its segments name."""
    ids: list[int] = []
    for segment in segments:
        start, end = segment["tokens"]
        if segment["part"] is None:
            ids += [batches.ignore_index] * (end - start)
        else:
            source = batches.sources[batches.names.index(segment["part"])]
            ids += source.read_span(start, end).tolist()
    return ids


def assert_served_rows_are_the_rows_provenance_names(batches: PackedBatches, steps: list[int]) -> None:
    for step in steps:
        batch = batches.batch(step)
        rows = batches.provenance(step, rank=batches.rank)
        assert len(rows) == len(batch["input_ids"])
        for served_ids, served_labels, segments in zip(batch["input_ids"], batch["labels"], rows):
            ids = rebuilt(batches, segments)
            assert ids[:-1] == served_ids.tolist() and ids[1:] == served_labels.tolist(), step


def targets_by_document(batches: PackedBatches, steps: range) -> dict[tuple[str, int], list[tuple[int, int, tuple]]]:
    """Every (step, global row, target positions) of each document, read off provenance."""
    found: dict[tuple[str, int], list[tuple[int, int, tuple]]] = {}
    for step in steps:
        for row, segments in enumerate(batches.provenance(step)):
            column = 0
            for segment in segments:
                start, end = segment["tokens"]
                if segment["part"] is not None and start + (column == 0) < end:  # a row's first id is no target
                    found.setdefault((segment["part"], segment["document"]), []).append(
                        (step, row, (start + (column == 0), end)))
                column += end - start
    return found


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rows_rebuilt_from_provenance_are_the_rows_served_across_a_resume_on_other_ranks(
        packs: dict[str, Path], layout: str) -> None:
    first = [loader(packs, {"a": 0.6, "b": 0.4}, layout, 8, rank=r, world_size=2) for r in range(2)]
    for rank in first:
        assert_served_rows_are_the_rows_provenance_names(rank, [0, 1, 5, 11])
        rank.step = 12
    state = pickle.loads(pickle.dumps(first[1].state_dict()))
    # from step 12: global batch 12 on three ranks, other weights, part c added
    second = [loader(packs, {"a": 0.3, "b": 0.3, "c": 0.4}, layout, 12, rank=r, world_size=3) for r in range(3)]
    for rank in second:
        rank.load_state_dict(state)
        assert_served_rows_are_the_rows_provenance_names(rank, [12, 13, 29, 40])
        assert rank.provenance(5) == first[0].provenance(5)  # the steps before the resume, as they were
    whole = second[0].provenance(29)
    assert whole[4:8] == second[1].provenance(29, rank=1) and len(whole) == 12


def test_when_is_the_exact_inverse_of_provenance_across_a_resume(packs: dict[str, Path]) -> None:
    for layout in LAYOUTS:
        first = loader(packs, {"a": 0.5, "b": 0.5}, layout, 6)
        first.step = 9
        batches = loader(packs, {"a": 0.2, "b": 0.3, "c": 0.5}, layout, 10, rank=1, world_size=2)
        batches.load_state_dict(first.state_dict())
        found = targets_by_document(batches, range(120))
        for part, n_docs in (("a", 120), ("b", 30), ("c", 60)):
            for document in range(n_docs):
                occurrences = [(o["step"], o["row"], o["tokens"]) for o in batches.when(part, document, epochs=2)]
                last = min(occurrences[-1][0] if occurrences else -1, 119)  # two epochs, or the steps read
                assert [o for o in occurrences if o[0] <= last] == sorted(
                    o for o in found.get((part, document), []) if o[0] <= last), (layout, part, document)


def test_when_in_stream_gives_every_target_of_a_document_once_per_epoch(packs: dict[str, Path]) -> None:
    batches = loader(packs, {"a": 0.7, "b": 0.3}, "stream", 8)
    pack = Pack(packs["a"])
    for document in range(pack.n_docs):
        start, end = (int(v) for v in pack.document_bounds()[document])
        for epoch in range(3):
            occurrences = batches.when("a", document, epochs=epoch + 1)
            targets = [p for o in occurrences for p in range(*o["tokens"])]
            expected = [p for p in range(max(start, 1), end)] * (epoch + 1)  # position 0 is never a target
            assert sorted(targets) == sorted(expected), (document, epoch)
    with pytest.raises(InputError, match="no part 'z'"):
        batches.when("z", 0)
    with pytest.raises(InputError, match="document 500 of part 'a' is not in its 'train' range"):
        batches.when("a", 500)


@pytest.fixture(scope="module")
def text_corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bundled sample as one text file, as a folder of three files, and as JSON Lines records
    (whose text JSON escapes), prepared with one vocabulary."""
    root = tmp_path_factory.mktemp("texts")
    text = Path(tokpack.sample_corpus()).read_text(encoding="utf-8")
    paragraphs = text.split("\n\n")
    folder = root / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("\n\n".join(paragraphs[:40]), encoding="utf-8")
    (folder / "sub" / "b.txt").write_text("\n\n".join(paragraphs[40:90]), encoding="utf-8")
    (folder / "c.txt").write_text("\n\n".join(paragraphs[90:130]), encoding="utf-8")
    records = root / "records.jsonl"
    records.write_text("".join(json.dumps({"text": p + "\n\t\"ż\""}) + "\n" for p in paragraphs[:200]), encoding="utf-8")
    cache = root / "cache"
    corpus = tokpack.prepare(tokpack.sample_corpus(), cache_dir=cache, vocab_size=300, document_bytes=1024)
    prepared = {"text": corpus.tokens_dir}
    for name, path in (("folder", folder), ("records", records)):
        prepared[name] = tokpack.prepare(path, cache_dir=cache, vocab=corpus.vocabulary_path, document_bytes=512).tokens_dir
    return prepared | {"vocabulary": corpus.vocabulary_path, "sample": Path(tokpack.sample_corpus()), "folder_root": root,
                       "records_file": records}


def source_bytes(place: tuple, text_corpora: dict[str, Path]) -> bytes:
    if len(place) == 3:  # a file's bytes
        name, start, end = place
        path = text_corpora["sample"] if name == "polish.txt" else text_corpora["folder_root"] / name
        return path.read_bytes()[start:end]
    name, record, start, end = place  # a record's text
    assert name == "records.jsonl"
    line = text_corpora["records_file"].read_text(encoding="utf-8").splitlines()[record]
    return json.loads(line)["text"].encode("utf-8")[start:end]


@pytest.mark.parametrize("corpus", ["text", "folder", "records"])
def test_each_segment_of_real_text_names_the_bytes_its_ids_decode_to(text_corpora: dict[str, Path], corpus: str) -> None:
    tokenizer = tokpack.load_vocabulary(text_corpora["vocabulary"])
    for layout in LAYOUTS:
        options = {"cache": False} if layout == "bestfit" else None
        batches = PackedBatches(text_corpora[corpus], layout=layout, length=64, global_batch=16, seed=1,
                                layout_options=options)
        source = batches.sources[0]
        checked = 0
        for step in (0, 3, 17):
            for segments in batches.provenance(step):
                for segment in segments:
                    if segment["part"] is None:
                        continue
                    ids = source.read_span(*segment["tokens"]).tolist()
                    assert source_bytes(segment["source"], text_corpora) == tokenizer.decode_bytes(ids), segment
                    checked += 1
        assert checked > 16 * 3
    files = {segment["source"][0] for step in range(20) for segments in batches.provenance(step) for segment in segments
             if segment["part"] is not None}
    if corpus == "folder":
        assert files == {"folder/a.txt", "folder/c.txt", "folder/sub/b.txt"}


def test_a_sharded_dataset_and_the_pack_merged_from_it_name_the_same_sources(text_corpora: dict[str, Path],
                                                                             tmp_path: Path) -> None:
    from tokpack.engines import prepare_sharded
    from tokpack.store import merge_dataset

    dataset = prepare_sharded(text_corpora["folder_root"] / "folder", tmp_path / "dataset", vocab=text_corpora["vocabulary"],
                              shards=3, document_bytes=512, processes=1)
    merge_dataset(dataset, tmp_path / "merged")
    sharded = PackedBatches(dataset.path, length=64, global_batch=16, seed=2)
    merged = PackedBatches(tmp_path / "merged", length=64, global_batch=16, seed=2)
    tokenizer = tokpack.load_vocabulary(text_corpora["vocabulary"])
    for step in (0, 5, 9):
        rows = sharded.provenance(step)
        unnamed = [[{**s, "part": None if s["part"] is None else "x"} for s in row] for row in rows]  # the folders' names
        assert unnamed == [[{**s, "part": None if s["part"] is None else "x"} for s in row] for row in merged.provenance(step)]
        for segment in (s for row in rows for s in row if s["part"] is not None):
            ids = sharded.sources[0].read_span(*segment["tokens"]).tolist()
            assert source_bytes(segment["source"], text_corpora) == tokenizer.decode_bytes(ids)


def test_a_chess_pack_names_the_month_table_and_the_game(tmp_path: Path) -> None:
    month = tmp_path / "games" / "year=2016" / "month=01" / "games.parquet"
    month.parent.mkdir(parents=True)
    table = games_table(read_games_strictly(FIXTURES / "chess_games.pgn"))
    pq.write_table(table, month)
    pack_games(month, make_encoder("uci"), tmp_path / "pack", batch_games=7)
    batches = PackedBatches(tmp_path / "pack", layout="documents", length=32, global_batch=4)
    seen = set()
    for step in range(10):
        for segments in batches.provenance(step):
            for segment in segments:
                if segment["part"] is not None:
                    name, game = segment["source"]
                    assert name == "year=2016/month=01/games.parquet" and game == segment["document"]
                    seen.add(game)
    assert len(seen) > 5


def test_a_position_pack_names_the_game_of_every_position(tmp_path: Path) -> None:
    """The position scheme makes a document per position: each names the game it was played in."""
    month = tmp_path / "games" / "year=2016" / "month=01" / "games.parquet"
    month.parent.mkdir(parents=True)
    table = games_table(read_games_strictly(FIXTURES / "chess_games.pgn")).slice(0, 12)
    pq.write_table(table, month)
    pack_games(month, make_encoder("position"), tmp_path / "pack", batch_games=5)
    pack = Pack(tmp_path / "pack")
    origins = np.load(tmp_path / "pack" / "origins.npy")
    assert len(origins) == pack.n_docs > len(table)
    plies = [len(moves.split()) for moves in table.column("uci").to_pylist()]
    assert np.bincount(origins[:, 1], minlength=len(table)).tolist() == plies  # each game once a position
    batches = PackedBatches(tmp_path / "pack", layout="documents", length=78, global_batch=4)
    for segments in batches.provenance(3):
        for segment in segments:
            if segment["part"] is not None:
                assert segment["source"] == ("year=2016/month=01/games.parquet", int(origins[segment["document"], 1]))


def test_data_that_records_no_origins_has_source_none(packs: dict[str, Path], tmp_path: Path) -> None:
    batches = PackedBatches(packs["a"], length=LENGTH, global_batch=4)
    assert {s["source"] for row in batches.provenance(0) for s in row} == {None}
    assert open_tokens(packs["a"]).meta.origins is None


def test_an_edited_origins_file_is_refused(text_corpora: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "pack"
    shutil.copytree(text_corpora["text"], copy)
    rows = np.load(copy / "origins.npy")
    rows[0, 1] += 1
    header = (copy / "origins.npy").read_bytes()[:128]
    (copy / "origins.npy").write_bytes(header + rows.astype("<i8").tobytes())
    batches = PackedBatches(copy, length=64, global_batch=4, shuffle=False)
    with pytest.raises(IntegrityError, match="origins.npy: SHA-256 differs from meta.json"):
        batches.provenance(0)


def test_provenance_refuses_a_bad_rank_and_a_step_that_served_a_removed_part(packs: dict[str, Path]) -> None:
    batches = loader(packs, {"a": 1, "b": 1}, "stream", 8, rank=0, world_size=2)
    with pytest.raises(InputError, match="rank"):
        batches.provenance(0, rank=2)
    batches.step = 4
    alone = PackedBatches(mixture(packs, {"a": 1}), length=LENGTH, global_batch=8, seed=3)
    alone.load_state_dict(batches.state_dict())
    with pytest.raises(InputError, match="step 2 served part 'b', which this loader does not serve"):
        alone.provenance(2)


@pytest.mark.parametrize("edit", ["backwards", "negative"])
def test_origins_edited_with_a_recomputed_checksum_and_seal_are_refused(text_corpora: dict[str, Path], tmp_path: Path,
                                                                        edit: str) -> None:
    import hashlib

    from tokpack.store import PackMeta

    copy = tmp_path / "pack"
    shutil.copytree(text_corpora["text"], copy)
    rows = np.load(copy / "origins.npy")
    if edit == "backwards":  # a document that ends before it starts
        rows[1, 1], rows[1, 2] = rows[1, 2], rows[1, 1]
    else:
        rows[1, 1] = -5
    payload = rows.astype("<i8").tobytes()
    (copy / "origins.npy").write_bytes((copy / "origins.npy").read_bytes()[:128] + payload)
    meta = json.loads((copy / "meta.json").read_text())
    meta["origins"]["sha256"] = hashlib.sha256(payload).hexdigest()
    (copy / "meta.json").write_text(PackMeta.model_validate(meta).sealed().to_json())
    batches = PackedBatches(copy, length=64, global_batch=4, shuffle=False)
    with pytest.raises(IntegrityError, match=r"origins.npy: document 1 .*is no span of bytes"):
        batches.provenance(0)
