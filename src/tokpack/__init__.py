"""tokpack: tokenize a corpus once, pack the ids, serve batches that cannot be mixed up.

The public API, by layer:

- vocabularies: :class:`BpeTokenizer`, :func:`load_vocabulary`, :class:`VocabIdentity`,
  :func:`require_vocabulary`, :func:`tokenizer_for`, the patterns ``GPT2_PATTERN``/``GPT4_PATTERN``;
- corpus preparation: :func:`prepare` returning a :class:`TokenizedCorpus`; :func:`sample_corpus`;
- the pack store: :class:`Pack` (read, verify);
- serving: :class:`PackedBatches`, the training path (layouts, global batches over ranks,
  mixtures, exact resume; more in :mod:`tokpack.serve`), and the first seed's fixed step
  schedule :class:`TokenBatches`, kept as a contract;
- interop: ``tokpack.export(source, fmt, out)`` (Megatron, nanoGPT, litdata, MDS, Parquet).
"""

import tokpack.export  # noqa: F401 (callable: tokpack.export(source, "megatron", out))
from tokpack.corpus import CorpusManifest, PrepareProgress, TokenizedCorpus, prepare, sample_corpus
from tokpack.serve import PackedBatches, TokenBatches
from tokpack.store import Pack
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
    "CorpusManifest",
    "Pack",
    "PackedBatches",
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
