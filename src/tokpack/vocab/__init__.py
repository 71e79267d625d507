"""Vocabularies: byte-level BPE tables, their file formats, their identity and their training."""

from tokpack.vocab.bytelevel import BpeTokenizer
from tokpack.vocab.hf_trainer import train_hf_bytelevel
from tokpack.vocab.identity import VocabIdentity, identity_of, require_vocabulary
from tokpack.vocab.loading import load_vocabulary
from tokpack.vocab.patterns import DEFAULT_PATTERN, END_OF_TEXT, GPT2_PATTERN, GPT4_PATTERN

__all__ = [
    "DEFAULT_PATTERN",
    "END_OF_TEXT",
    "GPT2_PATTERN",
    "GPT4_PATTERN",
    "BpeTokenizer",
    "VocabIdentity",
    "identity_of",
    "load_vocabulary",
    "require_vocabulary",
    "train_hf_bytelevel",
]
