"""The Python API and bad arguments or forged records: every public entry point checks what it
is given before using it, and says which argument is wrong with a tokpack error, never a numpy,
builtin or third-party exception, a ``MemoryError`` or a silent coercion."""

from __future__ import annotations

import base64
import hashlib
import json
import multiprocessing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tokpack
from tokpack.engines.driver import prepare_sharded
from tokpack.errors import InputError, IntegrityError, TokpackError
from tokpack.serve import EvalBatches, Mixture, PackedBatches, TokenBatches, Windows, make_layout
from tokpack.serve.memory import pack_of_documents
from tokpack.store import open_tokens
from tokpack.store.dataset import shard_name, write_dataset
from tokpack.store.format import DocumentCut, Source

from conftest import SAMPLE

HUGE = 10**12  # a size no machine holds


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pack")
    return pack_of_documents([list(range(1, 40)), [4, 5, 6] * 10, [7, 8, 9] * 5], n_vocab=50, pad_id=0,
                             directory=folder / "pack", train_documents=2)


def batches(pack: Path, **arguments: Any) -> PackedBatches:
    return PackedBatches(pack, **({"length": 4, "global_batch": 2} | arguments))


def window_loader(pack: Path, **arguments: Any) -> Any:
    torch_module = pytest.importorskip("tokpack.torch")
    return torch_module.WindowLoader(torch_module.WindowDataset(Windows(pack, 4, aligned=False)),
                                     **({"batch_size": 1} | arguments))


#: (what, the call, the argument its message must name)
CASES: list[tuple[str, Callable[[Path], Any], str]] = [
    ("PackedBatches seed=-1", lambda p: batches(p, seed=-1).batch(0), "seed"),
    ("PackedBatches seed=1.5 (not 1)", lambda p: batches(p, seed=1.5), "seed"),
    ("PackedBatches seed=None", lambda p: batches(p, seed=None), "seed"),
    ("PackedBatches rank='1'", lambda p: batches(p, world_size=2, rank="1"), "rank"),
    ("PackedBatches rank=True", lambda p: batches(p, world_size=2, rank=True), "rank"),
    ("PackedBatches rank=2**32-1", lambda p: batches(p, world_size=2, rank=4294967295), "rank"),
    ("PackedBatches data=None", lambda p: PackedBatches(None, length=4, global_batch=2), "data"),
    ("PackedBatches data=3", lambda p: PackedBatches(3, length=4, global_batch=2), "data"),
    ("PackedBatches length=10**12", lambda p: batches(p, length=HUGE).batch(0), "length"),
    ("PackedBatches global_batch=10**12", lambda p: batches(p, global_batch=HUGE).batch(0), "global_batch"),
    ("PackedBatches global_batch=2.0", lambda p: batches(p, global_batch=2.0), "global_batch"),
    ("PackedBatches world_size=0", lambda p: batches(p, world_size=0), "world_size"),
    ("PackedBatches world_size=3 of 2", lambda p: batches(p, world_size=3), "world_size"),
    ("PackedBatches micro_batches=None", lambda p: batches(p, micro_batches=None), "micro_batches"),
    ("PackedBatches layout=3", lambda p: batches(p, layout=3), "layout"),
    ("PackedBatches dtype=None", lambda p: batches(p, dtype=None), "dtype"),
    ("PackedBatches split=None", lambda p: batches(p, split=None), "split"),
    ("PackedBatches shuffle='no'", lambda p: batches(p, shuffle="no"), "shuffle"),
    ("PackedBatches position_ids=1", lambda p: batches(p, position_ids=1), "position_ids"),
    ("PackedBatches layout_options=[1]", lambda p: batches(p, layout_options=[1]), "layout_options"),
    ("PackedBatches lookahead=1.5", lambda p: batches(p, layout="bestfit", layout_options={"lookahead": 1.5}),
     "lookahead"),
    ("PackedBatches cache=3", lambda p: batches(p, layout="bestfit", layout_options={"cache": 3}), "cache"),
    ("PackedBatches.batch(1.5)", lambda p: batches(p).batch(1.5), "step"),
    ("PackedBatches.batch(-1)", lambda p: batches(p).batch(-1), "step"),
    ("PackedBatches.load_state_dict('x')", lambda p: batches(p).load_state_dict("x"), "state"),
    ("PackedBatches.load_state_dict(None)", lambda p: batches(p).load_state_dict(None), "state"),
    ("Mixture weight None", lambda p: Mixture([(p, None)]), "weight"),
    ("Mixture weight 'half'", lambda p: Mixture([(p, "half")]), "weight"),
    ("Mixture weight nan", lambda p: Mixture([(p, float("nan"))]), "weight"),
    ("Mixture weight True", lambda p: Mixture([(p, True)]), "weight"),
    ("Mixture seed=1.5", lambda p: Mixture([(p, 1.0)], seed=1.5), "seed"),
    ("Mixture stage start 10.7", lambda p: Mixture([(p, 1), (p, 1)], stages=[(0, [1, 1]), (10.7, [1, 2])]), "start"),
    ("Mixture parts None", lambda p: Mixture(None), "part"),  # type: ignore[arg-type]
    ("Mixture part not a pair", lambda p: Mixture([p]), "part"),  # type: ignore[list-item]
    ("EvalBatches.batch(-1)", lambda p: EvalBatches(p, length=4, batch_size=1).batch(-1), "step"),
    ("EvalBatches.batch(1.5)", lambda p: EvalBatches(p, length=4, batch_size=1).batch(1.5), "step"),
    ("EvalBatches rank='0'", lambda p: EvalBatches(p, length=4, batch_size=1, rank="0"), "rank"),
    ("EvalBatches world_size=0", lambda p: EvalBatches(p, length=4, batch_size=1, world_size=0), "world_size"),
    ("EvalBatches batch_size=10**12", lambda p: EvalBatches(p, length=4, batch_size=HUGE).batch(0), "batch_size"),
    ("EvalBatches length=10**12", lambda p: EvalBatches(p, length=HUGE, batch_size=1).batch(0), "length"),
    ("EvalBatches data=None", lambda p: EvalBatches(None, length=4, batch_size=1), "data"),
    ("Windows block=10**12", lambda p: Windows(p, HUGE)[0], "block"),
    ("Windows block=4.0", lambda p: Windows(p, 4.0), "block"),
    ("Windows pack=None", lambda p: Windows(None, 4), "pack"),
    ("Windows split=3", lambda p: Windows(p, 4, split=3), "split"),
    ("Windows aligned='yes'", lambda p: Windows(p, 4, aligned="yes"), "aligned"),
    ("TokenBatches None", lambda p: TokenBatches(None, 2, 4), "tokens_dir"),
    ("TokenBatches batch=True", lambda p: TokenBatches(p, True, 4), "batch"),
    ("TokenBatches.ids(1.5)", lambda p: TokenBatches(p, 1, 4).ids(1.5), "step"),
    ("TokenBatches.prefetch depth=0", lambda p: TokenBatches(p, 1, 4).prefetch(0, 1, depth=0), "depth"),
    ("make_layout length=None", lambda p: make_layout("stream", p, length=None), "length"),
    ("make_layout name=None", lambda p: make_layout(None, p, length=4), "layout"),
    ("WindowLoader seed=-1", lambda p: window_loader(p, seed=-1), "seed"),
    ("WindowLoader workers=1.5", lambda p: window_loader(p, workers=1.5), "workers"),
    ("WindowLoader batch_size=0", lambda p: window_loader(p, batch_size=0), "batch_size"),
    ("WindowLoader.load_state_dict(None)", lambda p: window_loader(p).load_state_dict(None), "state"),
    ("WindowDataset(None)", lambda p: pytest.importorskip("tokpack.torch").WindowDataset(None), "windows"),
    ("BatchLoader num_workers=-1", lambda p: pytest.importorskip("tokpack.torch").make_batch_loader(
        batches(p), num_workers=-1), "num_workers"),
    ("BatchLoader batches=None", lambda p: pytest.importorskip("tokpack.torch").BatchLoader(None), "batches"),
    ("prepare workers=0", lambda p: tokpack.prepare(SAMPLE / "polish.txt", workers=0), "workers"),
    ("prepare workers=-2", lambda p: tokpack.prepare(SAMPLE / "polish.txt", workers=-2), "workers"),
    ("prepare vocab_size=300.0", lambda p: tokpack.prepare(SAMPLE / "polish.txt", vocab_size=300.0), "vocab_size"),
    ("prepare vocab_size=True", lambda p: tokpack.prepare(SAMPLE / "polish.txt", vocab_size=True), "vocab_size"),
    ("prepare document_bytes='4096'", lambda p: tokpack.prepare(SAMPLE / "polish.txt", document_bytes="4096"),
     "document_bytes"),
    ("prepare validation=nan", lambda p: tokpack.prepare(SAMPLE / "polish.txt", validation=float("nan")),
     "validation"),
    ("prepare validation+test=1", lambda p: tokpack.prepare(SAMPLE / "polish.txt", validation=0.5, test=0.5),
     "validation"),
    ("prepare trainer='fast'", lambda p: tokpack.prepare(SAMPLE / "polish.txt", trainer="fast"), "trainer"),
    ("prepare on_error='ignore'", lambda p: tokpack.prepare(SAMPLE / "polish.txt", on_error="ignore"), "on_error"),
    ("prepare corpus=None", lambda p: tokpack.prepare(None), "corpus"),  # type: ignore[arg-type]
    ("prepare pattern matching nothing", lambda p: tokpack.prepare(SAMPLE / "polish.txt", pattern="x*"), "pattern"),
    ("prepare pattern that does not compile", lambda p: tokpack.prepare(SAMPLE / "polish.txt", pattern="(unclosed"),
     "pattern"),
    ("GPT-2 pair: encoder.json a list", lambda p: tokpack.load_vocabulary(_pair(p, "[1, 2]", "#version\n")),
     "encoder.json"),
    ("GPT-2 pair: vocab.bpe not UTF-8", lambda p: tokpack.load_vocabulary(_pair(p, '{"a": 0}', b"\xff\xfe")),
     "vocab.bpe"),
    ("GPT-2 pair: no vocab.bpe", lambda p: tokpack.load_vocabulary((_pair(p, '{"a": 0}', "")[0], p / "none.bpe")),
     "none.bpe"),
    ("export append_eod='yes'", lambda p: tokpack.export(p, "megatron", p.parent / "m", append_eod="yes"), "append_eod"),
    ("open_tokens(None)", lambda p: open_tokens(None), "path"),  # type: ignore[arg-type]
    ("open_tokens verify='yes'", lambda p: open_tokens(p, verify="yes"), "verify"),  # type: ignore[arg-type]
    ("open_remote cache_bytes=-5", lambda p: _open_remote(p, cache_bytes=-5), "cache_bytes"),
    ("open_remote unknown protocol", lambda p: _open_remote("foo://bucket/x"), "foo://bucket/x"),
]


def _pair(pack: Path, encoder: str, merges: str | bytes) -> tuple[Path, Path]:
    folder = pack.parent / "gpt2-pair"
    folder.mkdir(exist_ok=True)
    (folder / "encoder.json").write_text(encoder)
    (folder / "vocab.bpe").write_bytes(merges.encode() if isinstance(merges, str) else merges)
    return folder / "encoder.json", folder / "vocab.bpe"


def _open_remote(where: Path | str, **options: Any) -> Any:
    from tokpack.store.remote import open_remote

    url = where if isinstance(where, str) else f"file://{where}"
    return open_remote(url, cache_dir=Path(str(where)).parent / "remote-cache" if not isinstance(where, str) else None,
                       **options)


@pytest.mark.parametrize("what, call, name", CASES, ids=[case[0] for case in CASES])
def test_a_bad_argument_is_an_input_error_naming_it(what: str, call: Callable[[Path], Any], name: str,
                                                    pack: Path) -> None:
    with pytest.raises(TokpackError) as caught:
        result = call(pack)
        if hasattr(result, "__next__"):  # a generator checks on its first step
            next(result)
    assert isinstance(caught.value, (InputError, IntegrityError)), repr(caught.value)
    assert name in str(caught.value), str(caught.value)


def test_a_whole_float_is_not_quietly_made_an_integer(pack: Path) -> None:
    # seed=1.0 is refused rather than served as seed 1: a float seed is a mistake somewhere upstream
    with pytest.raises(InputError, match="seed"):
        batches(pack, seed=1.0)
    assert batches(pack, seed=np.int64(1)).seed == 1  # numpy integers are integers


def _forge(record: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit a sealed record and recompute its seal, as anyone can (the seal has no key)."""
    fields = json.loads(record.read_text())
    edit(fields)
    fields.pop("seal", None)
    seal = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    record.write_text(json.dumps(fields | {"seal": seal}, indent=2, sort_keys=True) + "\n")


def test_a_forged_padding_id_outside_the_vocabulary_is_refused_not_an_overflow(tmp_path: Path) -> None:
    forged = pack_of_documents([list(range(1, 40)), [4, 5, 6] * 10], n_vocab=50, pad_id=0,
                               directory=tmp_path / "pack", train_documents=1)
    _forge(forged / "meta.json", lambda fields: fields.update(pad_id=100000))
    for open_it in (lambda: EvalBatches(forged, length=4, batch_size=2).batch(0),
                    lambda: open_tokens(forged, verify=True)):
        with pytest.raises((InputError, IntegrityError), match="pad_id 100000"):
            open_it()


def _dataset(folder: Path) -> Path:
    for rank, documents in enumerate(([[1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13]])):
        pack_of_documents(documents, n_vocab=20, pad_id=0, directory=folder / shard_name(rank))
    write_dataset(folder, [shard_name(0), shard_name(1)], source=Source(name="x", sha256="0" * 64, n_bytes=0),
                  cut=DocumentCut(rule="list"))
    return folder


def test_a_forged_dataset_range_past_the_end_is_refused_not_an_index_error(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path / "dataset")
    assert open_tokens(dataset, verify=True).meta.n_tokens == 13

    def past_the_end(fields: dict[str, Any]) -> None:
        fields["ranges"]["validation"] = {"documents": [3, 9], "tokens": [11, 500], "source_bytes": None}

    _forge(dataset / "dataset.json", past_the_end)
    with pytest.raises((InputError, IntegrityError), match="validation"):
        EvalBatches(dataset, length=2, batch_size=1).batch(0)


def test_huge_mixture_weights_mix_as_their_ratio(pack: Path) -> None:
    huge = PackedBatches(Mixture([(pack, 1e308), (pack, 1e308)]), length=4, global_batch=4)
    equal = PackedBatches(Mixture([(pack, 1.0), (pack, 1.0)]), length=4, global_batch=4)
    for step in range(3):
        assert np.array_equal(huge.batch(step)["input_ids"], equal.batch(step)["input_ids"])


def test_a_file_as_the_bestfit_cache_is_skipped_as_the_readme_says(pack: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    cached = batches(pack, layout="bestfit", layout_options={"cache": a_file})
    uncached = batches(pack, layout="bestfit", layout_options={"cache": False})
    assert np.array_equal(cached.batch(0)["input_ids"], uncached.batch(0)["input_ids"])
    assert a_file.read_text() == "x"


def test_a_symlink_loop_is_an_input_error_in_every_reader(tmp_path: Path) -> None:
    looped = pack_of_documents([[1, 2, 3], [4, 5]], n_vocab=8, pad_id=0, directory=tmp_path / "pack")
    (looped / "tokens.npy").unlink()
    (looped / "tokens.npy").symlink_to(looped / "tokens.npy")
    readers: list[Callable[[], Any]] = [
        lambda: open_tokens(looped), lambda: PackedBatches(looped, length=2, global_batch=1),
        lambda: EvalBatches(looped, length=2, batch_size=1, split="train"), lambda: Windows(looped, 2),
        lambda: TokenBatches(looped, 1, 1), lambda: make_layout("documents", looped, length=2),
        lambda: PackedBatches(Mixture([(looped, 1.0)]), length=2, global_batch=1),
        lambda: tokpack.Pack(looped),
    ]
    for reader in readers:
        with pytest.raises(TokpackError, match="tokens.npy"):
            reader()


def test_a_pattern_that_skips_text_is_refused_on_the_first_document(prepared: tokpack.TokenizedCorpus,
                                                                    tmp_path: Path) -> None:
    ranks = _bare_rank_file(prepared, tmp_path)
    with pytest.raises(InputError, match=r"skips .* at character 0 of the first document"):
        tokpack.prepare(SAMPLE / "polish.txt", vocab=ranks, pattern="[a-z]+", cache_dir=tmp_path,
                        document_bytes=4096)
    with pytest.raises(InputError, match="skips"):
        tokpack.prepare(SAMPLE / "polish.txt", pattern=r"\d+", vocab_size=300, cache_dir=tmp_path,
                        document_bytes=4096)
    trained = [p for p in (tmp_path / "vocab").iterdir() if not p.name.startswith("user-")]
    assert not trained, trained  # refused before training


def test_a_pattern_that_skips_text_past_the_first_document_is_refused_there(prepared: tokpack.TokenizedCorpus,
                                                                            tmp_path: Path) -> None:
    # A pattern with no compiled pre-tokenizer (tiktoken encodes) that covers the first document
    # but not a later one: the ids of every document must spell all of its bytes.
    ranks = _bare_rank_file(prepared, tmp_path)
    corpus = tmp_path / "late.txt"
    corpus.write_text("hello world\n" * 2000 + "price: 5€ ok\n" + "bye\n" * 10, encoding="utf-8")
    with pytest.raises(InputError, match=r"late.txt: .*skips '€' at character \d+ of document [1-9][\d,]* "
                                         r"\(counting from 0\)"):
        tokpack.prepare(corpus, vocab=ranks, pattern=r"[\x00-\x7f]+", cache_dir=tmp_path, document_bytes=4096)
    assert not list(tmp_path.rglob("meta.json"))  # no pack published
    prepared_ascii = tokpack.prepare(corpus, vocab=ranks, pattern=r"[\x00-\x7f]+|[^\x00-\x7f]+",
                                     cache_dir=tmp_path, document_bytes=4096)
    assert prepared_ascii.pack().n_tokens > 0


def test_a_regex_that_tiktoken_gives_up_on_is_an_input_error(prepared: tokpack.TokenizedCorpus,
                                                              tmp_path: Path) -> None:
    # polish-phrase wrapped in a group is no named pattern: tiktoken's regex engine encodes it, and
    # its backtracking stack overflows on one long line (the compiled polish-phrase never does).
    from tokpack.vocab.patterns import POLISH_PHRASE_PATTERN

    tokenizer = tokpack.load_vocabulary(_bare_rank_file(prepared, tmp_path), pattern=f"(?:{POLISH_PHRASE_PATTERN})")
    assert tokenizer.engine == "tiktoken"
    line = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 150_000
    for encode in (lambda: tokenizer.encode_arrays([line]), lambda: tokenizer.encode(line),
                   lambda: tokenizer.encode_batch([line])):
        with pytest.raises(InputError, match=r"regex engine gave up on the pattern .*; use a named pattern"):
            encode()


def test_tiktokens_other_failures_on_a_regex_are_input_errors(prepared: tokpack.TokenizedCorpus,
                                                              tmp_path: Path) -> None:
    ranks = _bare_rank_file(prepared, tmp_path)
    # An empty match in context (after a word boundary): tiktoken panics slicing past it.
    boundary = tokpack.load_vocabulary(ranks, pattern=r"\b|[\s\S]")
    # A backtracking limit in encode_ordinary (a panic there, a ValueError in encode_to_numpy).
    backtracking = tokpack.load_vocabulary(ranks, pattern=r"(?:a|a)*(?=b)|[\s\S]")
    for tokenizer, text in ((boundary, "Ala ma kota.\n"), (backtracking, "a" * 5000 + " x")):
        for encode, given in ((tokenizer.encode, text), (tokenizer.encode_batch, [text, "b"]),
                              (tokenizer.encode_arrays, [text, "b"])):
            with pytest.raises(InputError, match=r"regex engine gave up on the pattern .*; use a named pattern"):
                encode(given)  # type: ignore[operator]


def test_an_empty_match_that_drops_a_character_names_the_pattern_and_a_fix(prepared: tokpack.TokenizedCorpus,
                                                                         tmp_path: Path) -> None:
    # tiktoken skips the character after an empty match; the regex module's finditer does not, so
    # no gap is found there: the ids' byte count is what tells.
    corpus = tmp_path / "small.txt"
    corpus.write_text("abc def\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"pre-tokenizer pattern '\(\?=b\)\|\[\\s\\S\]' leaves 1 of the 8 bytes of "
                                         r"the first document out of its ids .*; use a pattern that matches every"):
        tokpack.prepare(corpus, vocab=_bare_rank_file(prepared, tmp_path), pattern=r"(?=b)|[\s\S]", cache_dir=tmp_path)


def test_a_vocabulary_with_ids_up_to_2_to_the_32_prepares_with_tiktoken(tmp_path: Path) -> None:
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 4_000_000_000}
    path = tmp_path / "huge.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello ab world\n", encoding="utf-8")
    prepared = tokpack.prepare(corpus, vocab=path, pattern="gpt2", cache_dir=tmp_path / "cache")
    assert prepared.tokenizer.engine == "tiktoken"
    assert 4_000_000_000 in np.load(prepared.tokens_dir / "tokens.npy").tolist()


def test_a_shard_names_a_skipping_patterns_document_within_the_shard(prepared: tokpack.TokenizedCorpus,
                                                                      tmp_path: Path) -> None:
    records = ["clean text number %d here\n" % i for i in range(40)]
    records[37] += "bad \x00 nul"
    docs = tmp_path / "late.jsonl"
    docs.write_text("".join(json.dumps({"text": text}) + "\n" for text in records), encoding="utf-8")
    with pytest.raises(InputError, match=r"skips '\\x00' at character \d+ of document \d+ \(counting from 0\) of the "
                                         r"shard of units \d+ to \d+ \(files, records or rows"):
        prepare_sharded(docs, tmp_path / "sharded", shards=3, processes=1,
                        vocab=tokpack.load_vocabulary(_bare_rank_file(prepared, tmp_path), pattern=r"[^\x00]+"))


def _bare_rank_file(prepared: tokpack.TokenizedCorpus, folder: Path) -> Path:
    """The rank file alone (no vocabulary.json beside it), so pattern= says its pattern."""
    ranks = folder / "bare" / "ranks.tiktoken"
    ranks.parent.mkdir(parents=True, exist_ok=True)
    ranks.write_bytes((prepared.vocabulary_path.parent / "ranks.tiktoken").read_bytes())
    return ranks


def test_a_pattern_matching_the_empty_string_never_reaches_tiktoken(prepared: tokpack.TokenizedCorpus,
                                                                   tmp_path: Path) -> None:
    ranks = _bare_rank_file(prepared, tmp_path)
    with pytest.raises(InputError, match="matches the empty string"):
        tokpack.load_vocabulary(ranks, pattern="x*")


# -- sharded jobs ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder_with_a_bad_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three text files; the middle one (long enough to fall in every shard) has invalid UTF-8."""
    folder = tmp_path_factory.mktemp("corpus") / "in"
    folder.mkdir()
    lines = (SAMPLE / "polish.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    text = "".join(lines[:40])
    (folder / "a.txt").write_text(text[:6000], encoding="utf-8")
    (folder / "b.txt").write_bytes((text * 3).encode("utf-8")[:30000] + b"\n\x80 the bad byte\n")
    (folder / "c.txt").write_text(text[:6000], encoding="utf-8")
    return folder


def test_a_bad_file_spanning_shards_is_counted_once(folder_with_a_bad_file: Path, prepared: tokpack.TokenizedCorpus,
                                                    tmp_path: Path) -> None:
    from tokpack.engines import prepare_sharded

    single = tokpack.prepare(folder_with_a_bad_file, vocab=prepared.vocabulary_path, on_error="skip",
                             document_bytes=4096, cache_dir=tmp_path / "cache")
    assert single.meta.counts["skipped"] == 1
    dataset = prepare_sharded(folder_with_a_bad_file, tmp_path / "ds", vocab=prepared.vocabulary_path, shards=3,
                              processes=1, document_bytes=4096, on_error="skip")
    shards_skipping = [open_tokens(tmp_path / "ds" / shard_name(r)).meta.counts.get("skipped", 0) for r in range(3)]
    assert sum(shards_skipping) == 1, shards_skipping
    assert dataset.meta.counts["skipped"] == 1
    assert not list((tmp_path / "ds").glob("*.lock")), "lock files are left beside the dataset"


def _kill_the_progress_manager(rank: int) -> None:
    for child in multiprocessing.active_children():
        if child.name.startswith("SyncManager"):
            child.kill()
            child.join()


def test_a_killed_progress_manager_does_not_fail_the_job(folder_with_a_bad_file: Path,
                                                         prepared: tokpack.TokenizedCorpus, tmp_path: Path) -> None:
    from tokpack.engines import prepare_sharded

    heard: list[int] = []
    dataset = prepare_sharded(folder_with_a_bad_file, tmp_path / "ds", vocab=prepared.vocabulary_path, shards=3,
                              processes=1, document_bytes=4096, on_error="skip", on_done=_kill_the_progress_manager,
                              on_progress=lambda rank, *_: heard.append(rank))
    assert len(dataset.shards) == 3 and dataset.meta.counts["skipped"] == 1
    assert heard  # progress was heard before the manager died


def test_an_edited_job_refuses_instead_of_duplicating_documents(folder_with_a_bad_file: Path,
                                                                 prepared: tokpack.TokenizedCorpus,
                                                                 tmp_path: Path) -> None:
    from tokpack.engines import run_shard, start_job
    from tokpack.engines.shard_task import JOB_FILE

    job = tmp_path / "job"
    start_job(folder_with_a_bad_file, job, vocab=prepared.vocabulary_path, shards=2, document_bytes=4096,
              on_error="skip")
    run_shard(job, 0)
    # a plain edit breaks the seal
    record = job / JOB_FILE
    original = record.read_text()
    record.write_text(original.replace('"world_size": 2', '"world_size": 3'))
    with pytest.raises(IntegrityError, match="job.json: edited"):
        run_shard(job, 1)
    # an edit with a recomputed seal: shard 0's marker names the job it was made for
    record.write_text(original)
    _forge(record, lambda fields: fields.update(world_size=3))
    with pytest.raises(IntegrityError, match="shard 0 was made for another job"):
        for rank in (1, 2, 0):
            run_shard(job, rank)
    assert not (job / "dataset.json").exists()


def test_resuming_with_another_split_names_the_splits(pack: Path) -> None:
    state = batches(pack, split="train").state_dict()
    with pytest.raises((InputError, IntegrityError)) as caught:
        batches(pack, split="validation").load_state_dict(state)
    assert "'train'" in str(caught.value) and "'validation'" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("fmt", ["mds", "litdata", "hf"])
def test_rows_per_file_is_honoured_by_every_format_that_takes_it(fmt: str, pack: Path, tmp_path: Path) -> None:
    record = tokpack.export(pack, fmt, tmp_path / fmt, rows_per_file=1)
    data_files = [name for part in record.parts.values() for name in part.files
                  if not name.endswith(("index.json", "tokpack-export.json"))]
    assert len(data_files) == 3, data_files  # three documents, one a file


def test_resuming_over_other_ids_names_what_differs(pack: Path, tmp_path: Path) -> None:
    other = pack_of_documents([list(range(2, 41)), [4, 5, 6] * 10, [7, 8, 9] * 5], n_vocab=50, pad_id=0,
                              directory=tmp_path / "other", train_documents=2)
    state = batches(pack).state_dict()
    with pytest.raises(IntegrityError, match=r"ids \(tokens sha256\) \w+ when it was saved, \w+ in this loader"):
        batches(other).load_state_dict(state)
