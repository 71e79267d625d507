"""Ctrl-C while a layout's compiled kernels run raises ``KeyboardInterrupt``, never the
``SystemError`` that boxing a tuple of arrays with the interrupt pending made (the command then
reported a bug where the user had pressed Ctrl-C): the kernels a batch calls return one array,
and a best-fit layout's build holds signals around the kernels that return tuples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from interrupted_calls import interrupted_calls

from tokpack.store import DocumentCut, PackWriter, Source, Span
from tokpack.vocab import VocabIdentity


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 million ids in documents of 2 to 200: a segment or more in most rows of 8 ids."""
    target = tmp_path_factory.mktemp("interrupts") / "pack"
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=2_000_000, dtype=np.uint16)
    cuts = np.cumsum(rng.integers(2, 200, size=len(ids) // 2))
    with PackWriter(target, vocabulary=VocabIdentity(scheme="random", sha256="f" * 64, n_vocab=1001)) as writer:
        writer.add_documents(np.split(ids, cuts[cuts < len(ids)]))
        writer.commit(source=Source(name="random", sha256="0" * 64, n_bytes=0), cut=DocumentCut(rule="random"),
                      ranges={"train": Span(documents=(0, writer.n_docs), tokens=(0, writer.n_tokens))}, pad_id=1000)
    return target


@pytest.mark.parametrize("make", ["StreamLayout(pack, length=8)", "BestFitLayout(pack, length=8, cache=False)"],
                         ids=["stream", "bestfit"])
def test_ctrl_c_while_a_layout_makes_a_batchs_segments_raises_keyboard_interrupt(pack: Path, make: str) -> None:
    outcomes = interrupted_calls(f"""
        import numpy as np
        from tokpack.serve.layouts import BestFitLayout, StreamLayout
        from tokpack.store import Pack

        pack = Pack({str(pack)!r})
        layout = {make}
        rows = np.random.default_rng(0).integers(0, layout.n_rows, 100_000)

        def call():
            layout.segments(rows)
    """)
    assert set(outcomes) == {"KeyboardInterrupt"}, outcomes


def test_ctrl_c_while_a_best_fit_layout_is_built_raises_keyboard_interrupt(pack: Path) -> None:
    outcomes = interrupted_calls(f"""
        from tokpack.serve.layouts import BestFitLayout
        from tokpack.store import Pack

        pack = Pack({str(pack)!r})

        def call():
            BestFitLayout(pack, length=2048, cache=False)
    """)
    assert set(outcomes) == {"KeyboardInterrupt"}, outcomes
