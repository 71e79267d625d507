"""Train a small GPT on a tokpack pack with DistributedDataParallel: tokpack's serving path end to end.

One process (world size 1) or several under torchrun, on CPU (gloo) or GPUs (nccl):

    python examples/train_gpt.py --data PACK --steps 200
    torchrun --nproc_per_node 2 examples/train_gpt.py --data PACK --steps 100 --save run.pt
    torchrun --nproc_per_node 1 examples/train_gpt.py --data PACK --steps 200 --resume run.pt

'PACK' is a pack or a sharded dataset ('tokpack prepare' makes one; 'TokenizedCorpus.tokens_dir'
in Python). The rows of step k depend on (data, layout, length, seed, k) and on the history of
settings before k (the global batch and mixture weights of every earlier step, which a resume may
change), never on the number of ranks: rank r of W trains on rows [r*B/W, (r+1)*B/W) of the global
batch. A checkpoint holds the model, the optimizer, the loader's state, the data schedule and the
arguments; '--resume' restores all of them on any number of ranks (a setting left out is the
checkpoint's: its data and mixture, global batch, layout, length, seed and model sizes), refuses a
checkpoint made with another vocabulary ('tokpack.require_vocabulary') or over other data, and
continues with exactly the batches an uninterrupted run would have seen.

A resumed run may change its global batch and its mixture: '--resume run.pt --global-batch 32'
continues a run saved with another global batch, and '--mixture DIR=WEIGHT' (repeated) trains on
several packs in proportion, whose weights may change at a resume (given again, the list replaces
the saved one: a new pack is a part added, one left out a part removed; a pack is recognised by
its ids, so a renamed folder continues). Each change is printed at the resume's step. A change of
--length, --layout, --seed, --layers, --width or --heads is refused, as is --steps not past the
checkpoint's step. Each part continues its permutation where it stopped, so
no row is served twice within an epoch and none is skipped. The learning rate is not changed
for you: see 'learning_rate' below for where to scale it.

After a loss spike, '--resume run.pt --skip 4100:4200' leaves steps 4100 to 4199 untrained: their
rows are passed over, so every later step is what it would have been ('tokpack serve which DATA
--state run.pt --step 4150' names what they held).

'--log-batches' writes one line per step, 'STEP SHA256 LOSS ROWS': the SHA-256 of the step's
global 'input_ids' as little-endian int64 in row-major order (rank 0 gathers them from every
rank), so runs on different numbers of ranks can be compared line by line, and the rows of the
step's global batch (where it changes, the log shows it).

A mistake in the arguments or the data is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import tokpack
from tokpack.errors import InputError, IntegrityError, TokpackError, VocabularyMismatch
from tokpack.serve import EvalBatches, Mixture, PackedBatches
from tokpack.store import open_tokens
from tokpack.torch import make_batch_loader

LAYOUT_HELP = (
    "how rows are cut from the pack: 'stream' (consecutive rows, every id a target once per epoch, "
    "documents run into each other), 'documents' (rows start at document starts; short documents "
    "run on into the next), 'bestfit' (whole documents packed by best fit, the rest padded)"
)


# --------------------------------------------------------------------------------------------
# The model: a plain pre-norm GPT (token + position embeddings, causal self-attention, MLP).
# --------------------------------------------------------------------------------------------


class Block(nn.Module):
    """One pre-norm transformer block; attention is causal, and block-causal per document when
    a mask is given."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        if mask is None:
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """A small GPT: ``forward(input_ids, position_ids=None, document_ids=None) -> logits``."""

    def __init__(self, n_vocab: int, length: int, *, layers: int, width: int, heads: int) -> None:
        super().__init__()
        self.embed, self.position = nn.Embedding(n_vocab, width), nn.Embedding(length, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, n_vocab, bias=False)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None,
                document_ids: torch.Tensor | None = None) -> torch.Tensor:
        length = input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(length, device=input_ids.device)
        mask = None
        if document_ids is not None:
            # Block-causal: a position sees earlier positions of its own document only.
            causal = torch.ones(length, length, dtype=torch.bool, device=input_ids.device).tril()
            mask = (document_ids[:, :, None] == document_ids[:, None, :]) & causal
            mask = mask[:, None]  # one mask for every head
        x = self.embed(input_ids) + self.position(position_ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


# --------------------------------------------------------------------------------------------
# Ranks: torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; a plain `python` run is rank 0 of 1.
# --------------------------------------------------------------------------------------------


class Ranks:
    """This process's place in the job and the few collectives the loop needs."""

    def __init__(self) -> None:
        self.distributed = "WORLD_SIZE" in os.environ
        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        if torch.cuda.is_available():
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        if self.distributed:
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def total(self, *values: float) -> list[float]:
        """The sum over every rank of each value (float64, so counts stay exact)."""
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.distributed:
            dist.all_reduce(tensor)
        return tensor.tolist()

    def gather_rows(self, rows: torch.Tensor) -> torch.Tensor | None:
        """Every rank's rows stacked in rank order on rank 0 (``None`` elsewhere)."""
        if not self.distributed:
            return rows
        pieces = [torch.empty_like(rows) for _ in range(self.world_size)] if self.main else None
        dist.gather(rows, pieces, dst=0)
        return torch.cat(pieces) if pieces is not None else None

    def close(self) -> None:
        if self.distributed:
            dist.destroy_process_group()


def batch_sha256(input_ids: torch.Tensor) -> str:
    """SHA-256 of ids as little-endian int64, row-major: the same bytes for any dtype or device."""
    return hashlib.sha256(np.ascontiguousarray(input_ids.cpu().numpy(), dtype="<i8").tobytes()).hexdigest()


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: a crash leaves the previous checkpoint intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    torch.save(state, partial)
    os.replace(partial, path)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint this script wrote (it holds plain records beside tensors)."""
    if not path.is_file():
        raise InputError("no such checkpoint", where=path, fix="pass the file --save wrote")
    # weights_only=False: the loader state and data schedule are plain records, not tensors,
    # and this is a file the user's own run wrote.
    return torch.load(path, map_location="cpu", weights_only=False)


class DataVocabulary:
    """The vocabulary identity the data carries, for ``require_vocabulary`` when no ``--vocab``
    file is given."""

    def __init__(self, identity: tokpack.VocabIdentity) -> None:
        self.identity = identity


def data_vocabulary(data: Path, source: Any) -> Any:
    """The vocabulary the data carries (a pack holds its files), else only the identity it records."""
    try:
        return tokpack.load_vocabulary(data)
    except InputError:  # a pack written without its vocabulary, or chess ids
        return DataVocabulary(source.vocabulary)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="train_gpt.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    data = parser.add_argument_group("data")
    data.add_argument("--data", type=Path, metavar="DIR",
                      help="a pack or a sharded dataset directory (required, except with --mixture: its first part, "
                           "and with --resume: the checkpoint's)")
    data.add_argument("--vocab", type=Path, metavar="FILE",
                      help="the vocabulary file the data was made with; checked against the data and, with "
                           "--resume, against the checkpoint (default: the vocabulary the data carries, else the "
                           "identity it records)")
    data.add_argument("--layout", choices=["stream", "documents", "bestfit"], help=LAYOUT_HELP + " (default stream)")
    data.add_argument("--length", type=int, metavar="L", help="inputs per row (rows hold L+1 ids; default 64)")
    data.add_argument("--global-batch", type=int, metavar="B",
                      help="rows per step over all ranks; the number of ranks must divide it (default 8, or the "
                           "checkpoint's with --resume); with --resume, a new value takes effect from the "
                           "checkpoint's step")
    data.add_argument("--mixture", action="append", metavar="DIR=WEIGHT",
                      help="train on a mixture: a pack or sharded dataset and its weight, repeated for each part "
                           "(one vocabulary; --data, default the first part, gives the validation range). With --resume, new weights "
                           "take effect from the checkpoint's step; a directory not in the saved run is a part "
                           "added, one left out a part removed (parts are matched by their ids, then by folder name); "
                           "without --mixture, the checkpoint's mixture")
    data.add_argument("--micro-batches", type=int, default=1, metavar="M",
                      help="gradient accumulation: each rank's rows in M equal parts, one backward each (default 1)")
    data.add_argument("--document-mask", action="store_true", default=None,
                      help="attention stays inside each document (block-causal) and positions restart at "
                           "every document start")
    run = parser.add_argument_group("run")
    run.add_argument("--steps", type=int, required=True, metavar="N",
                     help="train until step N (a resumed run continues from its checkpoint's step)")
    run.add_argument("--seed", type=int, metavar="S", help="data order and model initialisation (default 0)")
    run.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate (default 3e-3)")
    run.add_argument("--layers", type=int, help="transformer blocks (default 2)")
    run.add_argument("--width", type=int, help="model width (default 64)")
    run.add_argument("--heads", type=int, help="attention heads; must divide the width (default 4)")
    run.add_argument("--loader-workers", type=int, default=0, metavar="W",
                     help="processes building batches ahead of the model (default 0: in the training process)")
    run.add_argument("--threads", type=int, metavar="T",
                     help="torch threads per rank (default: the cores divided among this node's ranks)")
    run.add_argument("--save", metavar="PATH",
                     help="write a checkpoint here at the end (rank 0); '{step}' in PATH is replaced by the step, "
                          "so periodic checkpoints do not overwrite each other")
    run.add_argument("--save-every", type=int, metavar="K", help="also checkpoint after every K steps")
    run.add_argument("--resume", type=Path, metavar="PATH", help="continue from this checkpoint, on any number of ranks")
    run.add_argument("--skip", action="append", metavar="START:END",
                     help="leave steps START to END-1 untrained, e.g. after a loss spike, resuming from a checkpoint "
                          "before it: their rows are passed over, so every later step is what it would have been "
                          "(repeated for more ranges; recorded in the checkpoint)")
    run.add_argument("--log-batches", type=Path, metavar="FILE",
                     help="one line per step: STEP SHA256-of-global-input_ids LOSS ROWS (ROWS: the step's global batch; "
                          "appended to when resuming)")
    run.add_argument("--eval-every", type=int, metavar="K",
                     help="after every K steps and at the end, the loss over the data's validation range (with "
                          "--document-mask, inside each document as in training)")
    run.add_argument("--print-every", type=int, default=10, metavar="K", help="print the loss every K steps (default 10)")
    args = parser.parse_args(argv)
    if args.data is None and args.resume is None and not args.mixture:
        parser.error("the following arguments are required: --data (or --mixture, or --resume)")
    for name in ("length", "global_batch", "steps", "layers", "width", "heads", "print_every", "save_every", "eval_every",
                 "micro_batches"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.loader_workers < 0:
        parser.error("--loader-workers must be at least 0")
    if args.save_every and not args.save:
        parser.error("--save-every needs --save")
    # Checked before any rank joins the process group: every rank exits 2, and only rank 0 says
    # why (torchrun sets WORLD_SIZE and RANK for each process it starts).
    # A resumed run without --global-batch takes the checkpoint's, checked in resolve_settings.
    world_size, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    share = (args.global_batch or world_size) // world_size
    problem = None if args.global_batch is None else (f"--global-batch {args.global_batch} is not a multiple of the {world_size} ranks (torchrun "
               "--nproc-per-node x --nnodes): each rank trains on an equal share; pass a multiple of "
               f"{world_size}, e.g. --global-batch {-(-args.global_batch // world_size) * world_size}"
               if args.global_batch % world_size
               else f"--micro-batches {args.micro_batches} does not divide a rank's {share} rows "
               f"(--global-batch {args.global_batch} / {world_size} ranks)" if share % args.micro_batches else None)
    if problem is not None:
        if rank == 0:
            parser.error(problem)
        sys.exit(2)
    parts = []
    for part in args.mixture or []:
        path, _, weight = part.rpartition("=")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if not path or not value > 0:
            parser.error(f"--mixture {part!r}: expected DIR=WEIGHT with a positive weight, e.g. web=0.7")
        parts.append((Path(path), value))
    args.mixture = parts or None
    skips = []
    for span in args.skip or []:
        first, colon, last = span.partition(":")
        if not (colon and first.isdigit() and last.isdigit() and int(last) > int(first)):
            parser.error(f"--skip {span!r}: expected START:END, two steps with END after START, e.g. --skip 4100:4200")
        skips.append((int(first), int(last)))
    args.skip = skips
    if args.data is None and parts and args.resume is None:
        args.data = parts[0][0]  # the validation range and the vocabulary check: the first part's
    return args


#: Settings a resumed run takes from its checkpoint unless given (then they are a change), and
#: their defaults for a fresh run.
SETTINGS: dict[str, Any] = {"data": None, "mixture": None, "layout": "stream", "length": 64, "global_batch": 8,
                            "seed": 0, "layers": 2, "width": 64, "heads": 4, "document_mask": False}
#: Of those, the ones a resumed run cannot change: the model's shape, and what numbers each part's rows.
FIXED = ("layout", "length", "seed", "layers", "width", "heads")


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def resolve_settings(args: argparse.Namespace, checkpoint: dict[str, Any] | None, world_size: int) -> list[str]:
    """Fill the settings not given on the command line: from ``checkpoint``'s arguments when
    resuming, else the defaults. Returns the changes a resumed run asked for, one line each;
    a change the checkpoint cannot continue (its model's shape, the rows' numbering) or
    ``--steps`` not past its step is refused before anything is loaded."""
    saved: dict[str, Any] = dict(checkpoint.get("arguments") or {}) if checkpoint is not None else {}
    changes: list[str] = []
    for name, default in SETTINGS.items():
        given = getattr(args, name)
        before = saved.get(name, default)
        if name == "data" and before is not None:
            before = Path(before)
        if name == "mixture" and before is not None:
            before = [(Path(path), float(weight)) for path, weight in before]
        if given is None:
            setattr(args, name, before)
            continue
        if checkpoint is None or given == before:
            continue
        if name in FIXED:
            raise InputError(f"{flag(name)} {given} differs from the checkpoint's {before}: "
                             + ("the model has another shape" if name in ("length", "layers", "width", "heads")
                                else "each part's position is a row of the saved run's order"), where=args.resume,
                             fix=f"leave {flag(name)} out to keep {before}, or start a new run without --resume")
        if name == "mixture":
            continue  # printed per part by the loader's history, see mixture_changes()
        changes.append(f"{flag(name)} {_shown(before)} -> {_shown(given)}")
    if args.data is None:
        raise InputError("the checkpoint does not record its --data", where=args.resume, fix="pass --data")
    if args.global_batch % world_size:
        raise InputError(f"--global-batch {args.global_batch} is not a multiple of the {world_size} ranks "
                         "(torchrun --nproc_per_node)", fix=f"pass a multiple of {world_size}, e.g. --global-batch "
                         f"{math.ceil(args.global_batch / world_size) * world_size}, or run on ranks that divide it")
    if (args.global_batch // world_size) % args.micro_batches:
        raise InputError(f"--micro-batches {args.micro_batches} does not divide a rank's "
                         f"{args.global_batch // world_size} rows (--global-batch {args.global_batch} / {world_size} ranks)",
                         fix="pass a --micro-batches that divides it")
    if args.width % args.heads:
        raise InputError(f"--heads {args.heads} does not divide --width {args.width}",
                         fix="pick a --heads that divides the width")
    if checkpoint is not None and args.steps <= int(checkpoint["step"]):
        raise InputError(f"--steps {args.steps} is not past the checkpoint's step {checkpoint['step']}: "
                         "there is nothing to train", where=args.resume, fix=f"pass --steps above {checkpoint['step']}")
    return changes


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(f"{path}={weight:g}" for path, weight in value)
    return str(value)


def mixture_changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """The weight of every part that changed between two ``repeats()`` listings, by name (a part
    added goes from 0, one removed to 0)."""
    old = {entry["name"]: entry["weight"] for entry in before}
    new = {entry["name"]: entry["weight"] for entry in after}
    lines = []
    for name in list(old) + [name for name in new if name not in old]:
        a, b = old.get(name, 0.0), new.get(name, 0.0)
        if abs(a - b) > 1e-9:
            what = "added" if name not in old or a == 0 else "removed" if b == 0 else "weight"
            lines.append(f"part {name} {what} {a:.3g} -> {b:.3g}")
    return lines


def saved_parts(checkpoint: dict[str, Any]) -> list[dict[str, Any]]:
    """Each part of the checkpoint's loader state with its (normalized) weight at its step."""
    state = checkpoint["loader"]
    in_force = [segment for segment in state.get("history") or [] if segment["step"] <= state["step"]]
    if not in_force:
        return []
    weights = in_force[-1]["weights"]
    total = sum(weights) or 1.0
    return [{"name": part["name"], "weight": weight / total} for part, weight in zip(state["parts"], weights)]


def next_trained(step: int, skipped: list[tuple[int, int]]) -> int:
    """The first step at or after ``step`` that the run trains (past every skipped ``[start, end)``)."""
    for start, end in sorted(skipped):
        if start <= step < end:
            step = end
    return step


def plain_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments as a checkpoint keeps them: paths as strings (also inside --mixture's
    pairs), so ``torch.load(..., weights_only=True)`` and ``tokpack serve`` read the checkpoint."""
    def plain(value: Any) -> Any:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, (list, tuple)):
            return type(value)(plain(item) for item in value)
        return value
    return {key: plain(value) for key, value in vars(args).items()}


def learning_rate(args: argparse.Namespace, batches: PackedBatches, step: int) -> float:
    """The learning rate of ``step``: here constant. The schedule is the user's business; a run
    whose global batch changes (``--global-batch`` at ``--resume``, or a schedule given to
    ``PackedBatches``) is where one scales it, e.g. ``args.lr * batches.global_batch_at(step) /
    first_global_batch`` (linear) or its square root (for Adam)."""
    return args.lr


#: Seconds between two progress lines of an evaluation (rank 0 prints them).
EVAL_PROGRESS_SECONDS = 10.0


def validation_batches(args: argparse.Namespace, ranks: Ranks) -> EvalBatches:
    """This rank's batches of the data's validation range (refused when the data has none)."""
    return EvalBatches(args.data, length=args.length, batch_size=args.global_batch // ranks.world_size,
                       rank=ranks.rank, world_size=ranks.world_size,
                       position_ids=args.document_mask, document_ids=args.document_mask)


def evaluate(model: GPT, args: argparse.Namespace, ranks: Ranks) -> float:
    """The mean loss over the validation range: every id a target exactly once across all ranks
    (the last rows are padding, never repeats). Under ``--document-mask`` the model sees the
    same document boundaries as in training (block-causal attention, restarting positions).
    A long one says how far it got every ``EVAL_PROGRESS_SECONDS``, with the time left."""
    evaluation = validation_batches(args, ranks)
    total = len(evaluation)
    if ranks.main:
        print(f"validation: {evaluation.layout.n_rows:,} rows of {args.length} ids in {total:,} steps", flush=True)
    started = said = time.perf_counter()
    model.eval()
    loss_sum = targets = 0.0
    with torch.no_grad():
        for done, batch in enumerate(evaluation, start=1):
            now = time.perf_counter()
            if ranks.main and done > 1 and now - said >= EVAL_PROGRESS_SECONDS:
                left = (now - started) / (done - 1) * (total - done + 1)
                print(f"validation: {done - 1:,} of {total:,} steps ({(done - 1) / total:.0%}), about {left:,.0f} s left",
                      flush=True)
                said = now
            tensors = {key: torch.from_numpy(batch[key]).to(ranks.device)
                       for key in ("input_ids", "labels", "position_ids", "document_ids") if key in batch}
            labels = tensors["labels"]
            logits = model(tensors["input_ids"], tensors.get("position_ids"), tensors.get("document_ids"))
            loss_sum += F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1),
                                        ignore_index=evaluation.ignore_index, reduction="sum").item()
            targets += float((labels != evaluation.ignore_index).sum())
    model.train()
    total, count = ranks.total(loss_sum, targets)
    return total / max(count, 1.0)


def train(args: argparse.Namespace, ranks: Ranks) -> list[float]:
    """Run the training loop; returns the global loss of every step this process ran."""
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // ranks.local_world_size))
    checkpoint = load_checkpoint(args.resume) if args.resume else None
    changes = resolve_settings(args, checkpoint, ranks.world_size)
    source = open_tokens(args.data)
    vocabulary: Any = tokpack.load_vocabulary(args.vocab) if args.vocab else data_vocabulary(args.data, source)
    tokpack.require_vocabulary(source, vocabulary)  # the vocabulary file is the data's

    data: Any = Mixture(args.mixture) if args.mixture else args.data
    batches = PackedBatches(
        data, layout=args.layout, length=args.length, global_batch=args.global_batch, seed=args.seed,
        rank=ranks.rank, world_size=ranks.world_size, micro_batches=args.micro_batches,
        position_ids=args.document_mask, document_ids=args.document_mask,
    )
    loader = make_batch_loader(batches, num_workers=args.loader_workers)

    torch.manual_seed(args.seed)  # every rank starts from the same weights (DDP also broadcasts rank 0's)
    model = GPT(source.vocabulary.n_vocab, args.length, layers=args.layers, width=args.width, heads=args.heads)
    model.to(ranks.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    step = 0
    if checkpoint is not None:
        # The tokenizer that will read this model's output must be the one it was trained on.
        try:
            tokpack.require_vocabulary(checkpoint, vocabulary)
        except VocabularyMismatch:
            raise
        except ValueError as error:  # any other refusal of the checkpoint's vocabulary record, said as a mismatch
            raise VocabularyMismatch(str(error), where=args.resume, fix="resume on the data it was trained on") from None
        # Each part continues where it stopped; a new --global-batch or --mixture takes effect from
        # here. Other data, vocabulary, layout, length or seed is refused, naming what differs,
        # before the model is touched.
        step = int(checkpoint["step"])
        try:
            loader.load_state_dict(checkpoint["loader"])
        except IntegrityError as error:  # its fix names the Python API; say it in this script's flags
            raise IntegrityError(error.what, where=args.resume,
                                 fix="pass the --data (or the --mixture parts) the run was trained on; other data "
                                     "joins a run only as a new part: --mixture DIR=WEIGHT, DIR a folder name the "
                                     "run has not used") from None
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        saved_batch = checkpoint["loader"].get("global_batch")
        if ranks.main:
            if saved_batch != batches.global_batch:
                print(f"step {step:>6}  global batch {saved_batch} -> {batches.global_batch}", flush=True)
            for line in mixture_changes(saved_parts(checkpoint), batches.repeats()) + [
                    change for change in changes if not change.startswith("--global-batch")]:
                print(f"step {step:>6}  {line}", flush=True)
    for start, end in args.skip:  # after the checkpoint's state: the steps before its step were trained
        if start < batches.position:
            raise InputError(f"--skip {start}:{end} starts before step {batches.position}, where the run resumes: "
                             "the steps before it were trained", where=args.resume,
                             fix=f"resume from a checkpoint saved at step {start} or before, or skip from step "
                                 f"{batches.position} on")
        batches.skip(start, end)
        if ranks.main:
            print(f"step {start:>6}  skipping steps {start}-{end - 1}", flush=True)
    if args.eval_every:  # data without a validation range is refused now, not at the first evaluation
        validation_batches(args, ranks)
    step = batches.position
    trained = DistributedDataParallel(model) if ranks.distributed else model

    def checkpoint_now() -> None:
        if args.save and ranks.main:
            save_checkpoint(Path(args.save.replace("{step}", str(step))), {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "loader": loader.state_dict(),  # the step of the next batch, the data's identity
                "data_schedule": batches.data_schedule(run="train_gpt"),
                "step": step,
                "arguments": plain_arguments(args),
            })
        if ranks.distributed:
            dist.barrier()  # no rank runs ahead of (or exits before) a checkpoint being written

    losses: list[float] = []
    trained_ids = 0
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        log = None
        if ranks.main and args.log_batches:
            args.log_batches.parent.mkdir(parents=True, exist_ok=True)
            log = stack.enter_context(open(args.log_batches, "a" if args.resume else "w", encoding="utf-8"))
        batch_iterator: Iterator[dict[str, torch.Tensor]] = iter(loader)
        while step < args.steps:
            batch = {name: value.to(ranks.device) for name, value in next(batch_iterator).items()
                     if isinstance(value, torch.Tensor)}  # (max_seqlen, a plain int, is not asked for)
            # Weigh by the targets of the whole global batch (padding is not a target), so the
            # gradient DDP averages is the global batch's mean, however the padding falls on ranks.
            (global_targets,) = ranks.total(float((batch["labels"] != batches.ignore_index).sum()))
            scale = ranks.world_size / max(global_targets, 1.0)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(args, batches, step)
            optimizer.zero_grad(set_to_none=True)
            local_sum = 0.0
            pieces = [dict(zip(batch, values)) for values in zip(*(t.chunk(args.micro_batches) for t in batch.values()))]
            for index, piece in enumerate(pieces):  # gradient accumulation: the rank's rows in equal parts
                last = index == len(pieces) - 1
                with trained.no_sync() if ranks.distributed and not last else contextlib.nullcontext():  # type: ignore[operator]
                    logits = trained(piece["input_ids"], piece.get("position_ids"), piece.get("document_ids"))
                    loss_sum = F.cross_entropy(logits.view(-1, logits.shape[-1]), piece["labels"].view(-1),
                                               ignore_index=batches.ignore_index, reduction="sum")
                    (loss_sum * scale).backward()
                local_sum += loss_sum.item()
            optimizer.step()
            (global_sum,) = ranks.total(local_sum)
            mean_loss = global_sum / max(global_targets, 1.0)
            losses.append(mean_loss)
            trained_ids += batches.global_batch_at(step) * args.length
            rows = ranks.gather_rows(batch["input_ids"])
            if log is not None and rows is not None:
                log.write(f"{step} {batch_sha256(rows)} {mean_loss:.6f} {len(rows)}\n")
                log.flush()
            step = next_trained(step + 1, batches.skipped)
            if ranks.main and (step % args.print_every == 0 or step == args.steps):
                rate = trained_ids / (time.perf_counter() - started)
                print(f"step {step:>6}  loss {mean_loss:.4f}  {rate:,.0f} tokens/s", flush=True)

            if args.eval_every and (step % args.eval_every == 0 or step == args.steps):
                validation = evaluate(model, args, ranks)
                if ranks.main:
                    print(f"step {step:>6}  validation loss {validation:.4f}", flush=True)
            if args.save_every and step % args.save_every == 0 and step < args.steps:
                checkpoint_now()

    checkpoint_now()
    return losses


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    ranks = Ranks()
    try:
        losses = train(args, ranks)
    except TokpackError as error:  # the user's data or checkpoint: one line, exit 2
        print(f"train_gpt.py: error: {error}", file=sys.stderr)
        return 2
    finally:
        ranks.close()
    if ranks.main and losses:
        print(f"done: loss {losses[0]:.3f} -> {losses[-1]:.3f} (chance {math.log(open_tokens(args.data).vocabulary.n_vocab):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
