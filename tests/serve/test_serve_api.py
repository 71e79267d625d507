"""The serving API: one obvious training path at the top of the package, every public name
importable, and the batches of every serving path unchanged on the repository's data."""

from __future__ import annotations

import hashlib
import importlib
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tokpack
import tokpack.serve
from tokpack.serve.memory import pack_of_documents

SERVE_MODULES = ["allocation", "assembly", "common", "evaluation", "fixed", "history", "layouts", "loader", "mixture",
                 "state"]


def test_packed_batches_is_the_training_path_at_the_top() -> None:
    from tokpack import PackedBatches
    from tokpack.serve.loader import PackedBatches as served

    assert PackedBatches is served is tokpack.serve.PackedBatches
    assert "PackedBatches" in tokpack.__all__
    assert "PackedBatches" in (tokpack.__doc__ or "")


def test_every_public_serve_name_imports() -> None:
    for name in tokpack.serve.__all__:
        assert getattr(importlib.import_module("tokpack.serve"), name) is not None, name
    for module_name in SERVE_MODULES:
        module = importlib.import_module(f"tokpack.serve.{module_name}")
        assert module.__doc__, module_name  # each module says what it is for
        for name in getattr(module, "__all__", []):
            assert hasattr(module, name), f"tokpack.serve.{module_name}.{name}"


def test_the_seeds_schedules_live_in_the_fixed_module() -> None:
    fixed = importlib.import_module("tokpack.serve.fixed")
    assert tokpack.TokenBatches is fixed.TokenBatches and tokpack.serve.Windows is fixed.Windows


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The bundled Polish sample as byte ids (256 is the padding id), one document a paragraph:
    a pack with a validation range, and a second pack of its last paragraphs reversed."""
    paragraphs = [p for p in Path(tokpack.sample_corpus()).read_bytes().split(b"\n\n") if p]
    documents = [list(p) for p in paragraphs[:400]]
    root = tmp_path_factory.mktemp("api")
    first = pack_of_documents(documents, n_vocab=257, pad_id=256, train_documents=350, directory=root / "first")
    second = pack_of_documents([d[::-1] for d in documents[-150:]], n_vocab=257, pad_id=256, directory=root / "second")
    return first, second


def _digest(value: Any) -> str:
    def plain(item: Any) -> Any:
        if isinstance(item, np.ndarray):
            return [str(item.dtype), item.tolist()]
        if isinstance(item, dict):
            return {key: plain(v) for key, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [plain(v) for v in item]
        return item
    return hashlib.sha256(json.dumps(plain(value), sort_keys=True, default=str).encode()).hexdigest()[:16]


def served(first: Path, second: Path) -> dict[str, str]:
    """What every serving path hands out over the two packs, as digests."""
    from tokpack.serve import EvalBatches, Mixture, PackedBatches, TokenBatches, Windows

    out: dict[str, str] = {}
    for layout in ("stream", "documents", "bestfit"):
        options = {"cache": False} if layout == "bestfit" else None
        batches = PackedBatches(first, layout=layout, length=24, global_batch=[(0, 4), (5, 8)], seed=3, rank=1,
                                world_size=2, micro_batches=2, position_ids=True, cu_seqlens=True, document_ids=True,
                                layout_options=options)
        out[layout] = _digest([batches.batch(step) for step in range(0, 400, 7)]
                              + [batches.micro_batches(step) for step in range(3)]
                              + [batches.global_rows(step) for step in (0, 9, 60)])
    def mixture() -> Mixture:
        return Mixture([(first, 0.7), (second, 0.3)], seed=4, stages=[(0, [0.7, 0.3]), (20, [0.2, 0.8])])
    batches = PackedBatches(mixture(), layout="documents", length=16, global_batch=8, seed=1, document_ids=True)
    out["mixture"] = _digest([batches.batch(step) for step in range(40)])
    batches.step = 30
    state = batches.state_dict()
    resumed = PackedBatches(Mixture([(first, 1), (second, 1)], seed=4), layout="documents", length=16,
                            global_batch=16, seed=1, document_ids=True)
    resumed.load_state_dict(state)
    again = pickle.loads(pickle.dumps(resumed))
    replayed = [resumed.batch(step) for step in range(30, 60)] + [again.batch(step) for step in (31, 59)]
    resumed.step = 30  # the stats of the saved step (batch(59) moved the position to 60)
    out["resumed"] = _digest(replayed + [resumed.repeats(45), resumed.stats])
    out["eval"] = _digest(list(EvalBatches(first, length=16, batch_size=3, world_size=2, rank=1, position_ids=True,
                                           cu_seqlens=True)))
    steps = TokenBatches(first, batch=3, length=16)
    out["token_batches"] = _digest([steps.ids(step) for step in range(0, 5000, 97)])
    for aligned in (True, False):
        windows = Windows(first, block=32, aligned=aligned)
        out[f"windows-{aligned}"] = _digest(windows.window_batch(np.arange(len(windows))))
    return out


#: What :func:`served` gave with the loader as one module (batches.py) before it was split; a
#: change here is a change of the batches every run sees.
BEFORE_THE_SPLIT = {
    "stream": "f76d4787c2a17d0a",
    "documents": "e8fc91fb77dc4d8b",
    "bestfit": "e4f515d44a55bcae",
    "mixture": "2384255b1ed6fdfe",
    "resumed": "3b351a7496c7a26b",
    "eval": "d88d1001ae76b6e8",
    "token_batches": "9648a50d279f612e",
    "windows-True": "4ae4b2d593dab413",
    "windows-False": "d57fe25669b78ead",
}


@pytest.mark.filterwarnings("ignore:.*aligned windows")
def test_every_serving_path_serves_what_it_served_before_the_split(packs: tuple[Path, Path]) -> None:
    assert served(*packs) == BEFORE_THE_SPLIT
