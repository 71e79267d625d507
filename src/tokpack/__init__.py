"""tokpack: tokenize a corpus once, pack the ids, serve batches that cannot be mixed up."""

from tokpack.vocab import (
    GPT2_PATTERN,
    GPT4_PATTERN,
    BpeTokenizer,
    VocabIdentity,
    load_vocabulary,
    require_vocabulary,
    tokenizer_for,
)

__all__ = [
    "GPT2_PATTERN",
    "GPT4_PATTERN",
    "BpeTokenizer",
    "VocabIdentity",
    "load_vocabulary",
    "require_vocabulary",
    "tokenizer_for",
]
