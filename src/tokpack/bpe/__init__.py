"""Exact byte-pair encoding: the reference rules, a fast trainer with the same merges, proofs."""

from tokpack.bpe.fast import (
    BpeProgress,
    BpeTraining,
    FileTraining,
    count_pieces,
    train_bytelevel,
    train_fast,
    train_from_files,
)
from tokpack.bpe.records import Challenge, Proof, TraceRow, corpus_sha256
from tokpack.bpe.reference import count_pairs, merge_pair, select_pair, train_bpe

__all__ = [
    "BpeProgress",
    "BpeTraining",
    "Challenge",
    "FileTraining",
    "Proof",
    "TraceRow",
    "corpus_sha256",
    "count_pairs",
    "count_pieces",
    "merge_pair",
    "select_pair",
    "train_bpe",
    "train_bytelevel",
    "train_fast",
    "train_from_files",
]
