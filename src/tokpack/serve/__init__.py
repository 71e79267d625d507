"""Serving batches. The training path is :class:`PackedBatches` (also ``tokpack.PackedBatches``):
layouts, a global batch over ranks, mixtures, a history of settings, exact resume; with
:class:`EvalBatches` for one ordered pass over a validation range. The fixed schedules
(:class:`TokenBatches`, :class:`Windows`), each a formula of its step, are in :mod:`tokpack.serve.fixed`.

Modules, one job each:

- :mod:`~tokpack.serve.loader`: :class:`PackedBatches`, the rank's slice of each step, its state;
- :mod:`~tokpack.serve.settings`: :class:`BatchSettings`, what a loader serves, checked once;
- :mod:`~tokpack.serve.mixture`: the parts and their weights (stages, names, caps);
- :mod:`~tokpack.serve.mixing`: weights changed while the run trains, from each part's loss;
- :mod:`~tokpack.serve.provenance`: what a step's rows hold, and when a document is trained;
- :mod:`~tokpack.serve.allocation`: a step's global rows per part under the history;
- :mod:`~tokpack.serve.history`: the history of global batch and weights;
- :mod:`~tokpack.serve.layouts`: a part's rows of ``length + 1`` ids (stream, documents, bestfit);
- :mod:`~tokpack.serve.assembly`: rows → the arrays a model takes, with document boundaries;
- :mod:`~tokpack.serve.batch_kernels`: the compiled kernels of layouts and assembly;
- :mod:`~tokpack.serve.state`: the loader state and data schedule records, and reading them back;
- :mod:`~tokpack.serve.evaluation`: :class:`EvalBatches`;
- :mod:`~tokpack.serve.fixed`: the fixed step schedules (:class:`TokenBatches`, windows);
- :mod:`~tokpack.serve.common`: what every loader shares (the id check, dtypes);
- :mod:`~tokpack.serve.memory`: small packs made from lists, for examples and tests;
- :mod:`~tokpack.serve.torch`: the PyTorch adapters.

The PyTorch adapters live in :mod:`tokpack.torch`, so importing this package never imports torch.
"""

from tokpack.serve.evaluation import EvalBatches
from tokpack.serve.fixed import TokenBatches, Windows
from tokpack.serve.history import batch_ramp
from tokpack.serve.layouts import LAYOUTS, Layout, make_layout
from tokpack.serve.loader import PackedBatches
from tokpack.serve.mixing import OnlineMixing
from tokpack.serve.mixture import Mixture
from tokpack.serve.settings import BatchSettings

__all__ = ["LAYOUTS", "BatchSettings", "EvalBatches", "Layout", "Mixture", "OnlineMixing", "PackedBatches", "TokenBatches", "Windows",
           "batch_ramp", "make_layout"]
