"""The Python API's argument checks: every public entry point checks what it is given before using
it, and says which argument is wrong with a tokpack error, never a numpy, builtin or third-party
exception, a ``MemoryError`` or a silent coercion; a loader state resumed on other data or another
split, or a step past the end, names what differs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tokpack
from tokpack.errors import InputError, IntegrityError, TokpackError
from tokpack.serve import EvalBatches, Mixture, PackedBatches, TokenBatches, Windows, make_layout
from tokpack.serve.memory import pack_of_documents
from tokpack.store import open_tokens

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


def test_eval_batch_past_the_end_is_refused(prepared: tokpack.TokenizedCorpus) -> None:
    evaluation = EvalBatches(prepared.tokens_dir, length=16, batch_size=2)
    n = len(evaluation)
    assert n > 0
    assert not np.all(np.asarray(evaluation.batch(n - 1)["labels"]) == evaluation.ignore_index)
    with pytest.raises(InputError, match=rf"{n}\b") as caught:
        evaluation.batch(n)
    assert str(n) in str(caught.value) and "step" in str(caught.value)
