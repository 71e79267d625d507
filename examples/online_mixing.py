"""Online data mixing, DoReMi-style, with tokpack: the weights of a mixture change every N steps
from each part's loss, and go into the loader's history, so a resumed run replays them exactly.

    python examples/online_mixing.py --mixture pl=PACK1 --mixture code=PACK2 --steps 200 --every 20 --save run.pt
    python examples/online_mixing.py --steps 400 --resume run.pt

Every --every steps each part's weight is updated as DoReMi (Xie et al., 2023) updates its domain
weights: multiplied by exp(--step-size * excess loss), then mixed with the uniform weights by
--smoothing. DoReMi's excess loss is a part's loss above a reference model's; this example trains
no reference model and measures it against the lowest part loss of the same steps instead, so the
part the model finds hardest gains weight. The new weights are set with 'OnlineMixing', which
calls 'batches.set_weights(step, weights)': the loader's state and its data schedule hold them.

A checkpoint (--save) holds the model, the optimizer, the loader's state and the mixing's partial
sums; --resume restores them and continues with exactly the batches and weights an uninterrupted
run would have had (the settings left out are the checkpoint's).

--log FILE writes one line per step, 'STEP SHA256 WEIGHTS': the SHA-256 of the step's input_ids
(little-endian int64, row-major) and the weights in force at that step.

A mistake in the arguments or the data is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tokpack.errors import TokpackError
from tokpack.serve import Mixture, OnlineMixing, PackedBatches


class Bigram(nn.Module):
    """The smallest language model that learns: each id's embedding predicts the next id."""

    def __init__(self, n_vocab: int, width: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_vocab, width)
        self.out = nn.Linear(width, n_vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.embedding(ids))


class DoReMi:
    """DoReMi's update of the weights from the parts' mean losses (see the module docstring)."""

    def __init__(self, step_size: float, smoothing: float) -> None:
        self.step_size, self.smoothing = step_size, smoothing

    def __call__(self, losses: np.ndarray, weights: np.ndarray) -> np.ndarray:
        excess = np.nan_to_num(np.maximum(losses - np.nanmin(losses), 0.0))  # a part without rows: none
        logits = np.log(np.maximum(weights, 1e-12)) + self.step_size * excess
        raised = np.exp(logits - logits.max())
        return (1 - self.smoothing) * raised / raised.sum() + self.smoothing / len(weights)


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mixture", action="append", metavar="NAME=PACK", help="a part of the mixture (repeat it); started at equal weights")
    parser.add_argument("--steps", type=int, required=True, help="train until this step")
    parser.add_argument("--every", type=int, default=20, help="steps between two changes of the weights")
    parser.add_argument("--step-size", type=float, default=1.0, help="DoReMi's step size for the excess losses")
    parser.add_argument("--smoothing", type=float, default=1e-3, help="the share of the uniform weights mixed in")
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--global-batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--save", type=Path, help="write a checkpoint here at the end")
    parser.add_argument("--resume", type=Path, help="continue from this checkpoint")
    parser.add_argument("--log", type=Path, help="write 'STEP SHA256 WEIGHTS' per step here")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = arguments(argv)
    checkpoint: dict[str, Any] | None = None
    if args.resume is not None:
        checkpoint = torch.load(args.resume, weights_only=False)
        saved = checkpoint["arguments"]
        args.mixture = args.mixture or saved["mixture"]
        for name in ("every", "step_size", "smoothing", "length", "global_batch", "seed", "width"):
            setattr(args, name, saved[name])  # the run's settings: changing them would not be this run
    if not args.mixture:
        return fail("give the mixture's parts: --mixture NAME=PACK (repeated)")
    parts = [entry.split("=", 1) for entry in args.mixture]
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # the same sums in the same order: a resumed run computes the same losses
    batches = PackedBatches(Mixture([(pack, 1.0) for _, pack in parts], names=[name for name, _ in parts]),
                            length=args.length, global_batch=args.global_batch, seed=args.seed)
    model = Bigram(batches.n_vocab, args.width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    update = DoReMi(args.step_size, args.smoothing)
    mixing = OnlineMixing(batches, every=args.every, update=update)
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        batches.load_state_dict(checkpoint["loader"])  # the weights set so far come back with the history
        mixing.load_state_dict(checkpoint["mixing"])
    log = open(args.log, "a" if checkpoint is not None else "w", encoding="utf-8") if args.log else None
    step = batches.step
    if step >= args.steps:
        return fail(f"--steps {args.steps} is not past the step the run is at ({step})")
    while step < args.steps:
        batch = batches.batch(step)
        ids, labels = torch.from_numpy(batch["input_ids"]), torch.from_numpy(batch["labels"])
        logits = model(ids)
        per_id = F.cross_entropy(logits.view(-1, batches.n_vocab), labels.view(-1), ignore_index=batches.ignore_index,
                                 reduction="none").view(labels.shape)
        counted = (labels != batches.ignore_index).sum(dim=1).clamp(min=1)
        per_row = per_id.sum(dim=1) / counted
        loss = per_row.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log is not None:
            digest = hashlib.sha256(batch["input_ids"].astype("<i8").tobytes()).hexdigest()
            log.write(f"{step} {digest} {' '.join(f'{w:.6f}' for w in batches.weights(step))}\n")
        changed = mixing.observe(step, per_row.detach().numpy())
        if changed is not None:
            print(f"step {step + 1}: weights " + ", ".join(f"{n} {w:.3f}" for n, w in zip(batches.names, changed)))
        step = batches.step = step + 1
    if log is not None:
        log.close()
    if args.save is not None:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "loader": batches.state_dict(),
                    "mixing": mixing.state_dict(), "arguments": vars(args) | {"save": None, "resume": None, "log": None}}, args.save)
    print(f"step {step}: loss {loss.item():.3f}")
    return 0


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except TokpackError as error:
        sys.exit(fail(str(error)))
