"""A mixture: several token sources served together, in proportion to weights that may change
in stages; the names a loader state calls its parts by.

>>> mixture = Mixture([("a", 3.0), ("b", 1.0)], stages=[(0, [3.0, 1.0]), (100, [1.0, 1.0])])
>>> [(start, weights.tolist()) for start, weights in mixture.stages]
[(0, [0.75, 0.25]), (100, [0.5, 0.5])]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from tokpack import _checks as checks
from tokpack.errors import InputError, VocabularyMismatch
from tokpack.serve.common import Data
from tokpack.store import TokenSource


class Mixture:
    """Several token sources served together in proportion to their weights.

    Args:
        parts: ``[(data, weight), ...]``: a token source or its directory, and a positive weight
            (weights are normalized).
        seed: mixed into every part's shuffle and the order of rows inside a step.
        stages: ``[(start_step, [weight, ...]), ...]``: from ``start_step`` on, these weights
            (a curriculum); the first stage must start at step 0. Given stages replace the
            parts' own weights (which stay in the data schedule as given).
        names: what a loader state calls each part (default: its directory's name, with ``~2``,
            ``~3``... for a name met again). A resume matches parts by name: a part of the
            saved run that is missing here is removed (its position is kept), a new name is a
            part added.
        max_epochs: per part, the most epochs it may serve (a positive integer, or ``None``: no
            cap). A part that would pass its cap in a step stops there: from that step its
            weight is 0 (recorded in the history, the other parts' weights renormalized), so it
            never serves a row twice more than its cap allows; ``repeats()`` says where it stopped.

    The rows each part gives step ``k`` follow from ``k`` and the weights alone: the running
    total of every part stays within one row of its exact share (``weight * global_batch *
    steps``, summed over stages).

    Raises:
        InputError: no parts, a weight that is not positive, malformed stages, or two parts of
            one name.
    """

    def __init__(self, parts: Sequence[tuple[Data, float]], *, seed: int = 0,
                 stages: Sequence[tuple[int, Sequence[float]]] | None = None,
                 names: Sequence[str] | None = None, max_epochs: Sequence[int | None] | None = None) -> None:
        if isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence) or not parts:
            raise InputError("a mixture needs at least one part: parts=[(data, weight), ...]")
        for index, part in enumerate(parts):
            if not isinstance(part, (tuple, list)) or len(part) != 2:
                raise InputError(f"mixture part {index} must be a (data, weight) pair, got {type(part).__name__}")
        self.parts = [(data, checks.finite_float(f"mixture weight {index}", weight))
                      for index, (data, weight) in enumerate(parts)]
        self.seed = checks.non_negative_int("seed", seed)
        weights = [weight for _, weight in self.parts]
        stage_list: list[tuple[int, list[float]]] = [(0, weights)]
        if stages:
            stage_list = []
            for index, stage in enumerate(stages):
                if not isinstance(stage, (tuple, list)) or len(stage) != 2 or not isinstance(stage[1], Sequence):
                    raise InputError(f"mixture stage {index} must be (start_step, [weight, ...])")
                start = checks.non_negative_int(f"mixture stage {index}'s start step", stage[0])
                stage_list.append((start, [checks.finite_float(f"mixture stage {index}'s weight {i}", w)
                                           for i, w in enumerate(stage[1])]))
        if stage_list[0][0] != 0 or any(b[0] <= a[0] for a, b in itertools.pairwise(stage_list)):
            raise InputError("mixture stages must start at step 0 and increase",
                             fix="e.g. stages=[(0, [0.9, 0.1]), (1000, [0.5, 0.5])]")
        for start, stage_weights in stage_list:
            if len(stage_weights) != len(self.parts):
                raise InputError(f"mixture stage at step {start} has {len(stage_weights)} weights for {len(self.parts)} parts")
            if any(not math.isfinite(w) or w < 0 for w in stage_weights) or sum(stage_weights) <= 0:
                raise InputError(f"mixture weights must be non-negative with a positive sum, got {stage_weights}")
        if any(weight <= 0 for weight in weights) and not stages:
            raise InputError(f"mixture weights must be positive, got {weights}")
        # scaled by the largest weight first, so weights near the float limit (1e308) sum finitely
        self.stages = [(start, normalized(ws)) for start, ws in stage_list]
        if names is not None:
            self.names: list[str] | None = [str(name) for name in names]
            if len(self.names) != len(self.parts) or len(set(self.names)) != len(self.names):
                raise InputError(f"mixture names {self.names} must be one distinct name a part")
        else:
            self.names = None
        self.max_epochs: list[int | None] | None = None
        if max_epochs is not None:
            if isinstance(max_epochs, (str, bytes)) or not isinstance(max_epochs, Sequence) or len(max_epochs) != len(self.parts):
                raise InputError(f"max_epochs must give one cap a part ({len(self.parts)}), got {max_epochs!r}",
                                 fix="e.g. max_epochs=[None, 2]: the second part at most two epochs")
            self.max_epochs = [None if cap is None else checks.positive_int(f"max_epochs of part {index}", cap)
                               for index, cap in enumerate(max_epochs)]

    def __len__(self) -> int:
        return len(self.parts)


def default_names(names: Sequence[str]) -> list[str]:
    """Names made distinct in order: the second ``a`` is ``a~2``.

    >>> default_names(["a", "b", "a"])
    ['a', 'b', 'a~2']
    """
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}~{seen[name]}")
    return out


def normalized(weights: list[float]) -> np.ndarray:
    """``weights`` as shares summing to 1 (scaled by the largest first, so weights near the float
    limit sum finitely)."""
    scaled = np.asarray(weights, dtype=np.float64) / max(weights)
    return scaled / scaled.sum()


def check_one_vocabulary(sources: list[TokenSource]) -> None:
    """Refuse parts of two vocabularies, or of two padding ids.

    Raises:
        VocabularyMismatch: naming both parts.
    """
    first = sources[0]
    for other in sources[1:]:
        a, b = first.vocabulary, other.vocabulary
        if (a.sha256, a.n_vocab) != (b.sha256, b.n_vocab):
            raise VocabularyMismatch(f"mixture parts use two vocabularies: {first.path} has {a.scheme}:{a.short} "
                                     f"(n_vocab {a.n_vocab}), {other.path} has {b.scheme}:{b.short} (n_vocab {b.n_vocab})")
        if first.meta.pad_id != other.meta.pad_id:
            raise VocabularyMismatch(f"mixture parts pad with two ids: {first.path} with {first.meta.pad_id}, "
                                     f"{other.path} with {other.meta.pad_id}")


def portable(data: Data | Mixture) -> Data | Mixture:
    """``data`` as another process can open it: a pack or sharded dataset by its directory, not
    its mapped stream (a mixture's parts likewise); anything else as it is."""
    from tokpack.store import Pack, ShardedDataset

    if isinstance(data, Mixture):
        return Mixture([(portable(part), weight) for part, weight in data.parts], seed=data.seed,  # type: ignore[misc]
                       stages=[(step, weights.tolist()) for step, weights in data.stages], names=data.names,
                       max_epochs=data.max_epochs)
    return str(data.path) if isinstance(data, (Pack, ShardedDataset)) else data


__all__ = ["Mixture", "check_one_vocabulary", "default_names", "normalized", "portable"]
