"""The names of the vocabulary trainers (``prepare(trainer=...)``, ``--trainer``, a training
recipe): ``exact``, tokpack's own (:mod:`tokpack.bpe`), and ``hf``, Hugging Face ``tokenizers``."""

from __future__ import annotations

from typing import Literal

Trainer = Literal["hf", "exact"]
