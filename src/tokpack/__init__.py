"""tokpack: tokenize a corpus once, pack the ids, serve batches that cannot be mixed up.

The public API, by layer:

- vocabularies: :class:`BpeTokenizer`, :func:`load_vocabulary`, :class:`VocabIdentity`,
  :func:`require_vocabulary`, :func:`tokenizer_for`, the patterns ``GPT2_PATTERN``/``GPT4_PATTERN``;
- corpus preparation: :func:`prepare` returning a :class:`TokenizedCorpus`; :func:`sample_corpus`;
- the pack store: :class:`Pack` (read, verify);
- serving: :class:`TokenBatches`;
- interop: ``tokpack.export(source, fmt, out)`` (Megatron, nanoGPT, litdata, MDS, Parquet).
"""

import tokpack.export  # noqa: F401 (callable: tokpack.export(source, "megatron", out))
from tokpack.corpus import CorpusManifest, sample_corpus
from tokpack.preparing import PrepareProgress, TokenizedCorpus, prepare
from tokpack.serve import TokenBatches
from tokpack.store import Pack
from tokpack.store.vocabulary import load_vocabulary, tokenizer_for
from tokpack.vocab import (
    GPT2_PATTERN,
    GPT4_PATTERN,
    BpeTokenizer,
    VocabIdentity,
    require_vocabulary,
)

__all__ = [
    "GPT2_PATTERN",
    "GPT4_PATTERN",
    "BpeTokenizer",
    "CorpusManifest",
    "Pack",
    "PrepareProgress",
    "TokenBatches",
    "TokenizedCorpus",
    "VocabIdentity",
    "load_vocabulary",
    "prepare",
    "require_vocabulary",
    "sample_corpus",
    "tokenizer_for",
]
