"""tokpack: tokenize a corpus once, pack the ids, serve batches that cannot be mixed up.

The public API, by layer:

- vocabularies: :class:`BpeTokenizer`, :func:`load_vocabulary`, :class:`VocabIdentity`,
  :func:`require_vocabulary`, :func:`tokenizer_for`, the patterns ``GPT2_PATTERN``/``GPT4_PATTERN``;
- corpus preparation: :func:`prepare` returning a :class:`TokenizedCorpus`, its settings as the
  records :class:`CorpusReading`, :class:`VocabularyRequest` and :class:`Execution`; :func:`sample_corpus`;
- the pack store: :class:`Pack` (read, verify);
- serving: :class:`PackedBatches`, the training path (layouts, global batches over ranks,
  mixtures, exact resume; more in :mod:`tokpack.serve`), and the fixed step schedule
  :class:`TokenBatches`, a contract that does not change;
- interop: :func:`export` (``tokpack.export(source, fmt, out)``: Megatron, nanoGPT, litdata, MDS,
  Parquet; the formats are :mod:`tokpack.store.formats`).

Each name is imported from its module on first use (PEP 562), so ``import tokpack`` (and the
command line, which imports ``tokpack.cli`` through it) loads numpy, pydantic and the encoders
only when something asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokpack._lazy import lazy_attributes

if TYPE_CHECKING:
    from tokpack.corpus import CorpusManifest, sample_corpus
    from tokpack.preparing import CorpusReading, Execution, PrepareProgress, TokenizedCorpus, VocabularyRequest, prepare
    from tokpack.serve import PackedBatches, TokenBatches
    from tokpack.store import Pack
    from tokpack.store.exporting import export
    from tokpack.vocab import (
        GPT2_PATTERN,
        GPT4_PATTERN,
        BpeTokenizer,
        VocabIdentity,
        require_vocabulary,
    )
    from tokpack.vocab.loading import load_vocabulary, tokenizer_for

#: Where each public name lives: ``tokpack.NAME`` imports that module on first use.
_HOMES = {
    "GPT2_PATTERN": "tokpack.vocab",
    "GPT4_PATTERN": "tokpack.vocab",
    "BpeTokenizer": "tokpack.vocab",
    "CorpusManifest": "tokpack.corpus",
    "CorpusReading": "tokpack.preparing",
    "Execution": "tokpack.preparing",
    "Pack": "tokpack.store",
    "PackedBatches": "tokpack.serve",
    "PrepareProgress": "tokpack.preparing",
    "TokenBatches": "tokpack.serve",
    "TokenizedCorpus": "tokpack.preparing",
    "VocabIdentity": "tokpack.vocab",
    "VocabularyRequest": "tokpack.preparing",
    "export": "tokpack.store.exporting",
    "load_vocabulary": "tokpack.vocab.loading",
    "prepare": "tokpack.preparing",
    "require_vocabulary": "tokpack.vocab",
    "sample_corpus": "tokpack.corpus",
    "tokenizer_for": "tokpack.vocab.loading",
}

__all__ = [
    "GPT2_PATTERN",
    "GPT4_PATTERN",
    "BpeTokenizer",
    "CorpusManifest",
    "CorpusReading",
    "Execution",
    "Pack",
    "PackedBatches",
    "PrepareProgress",
    "TokenBatches",
    "TokenizedCorpus",
    "VocabIdentity",
    "VocabularyRequest",
    "export",
    "load_vocabulary",
    "prepare",
    "require_vocabulary",
    "sample_corpus",
    "tokenizer_for",
]


#: The packages a user reaches as attributes (``tokpack.serve.Windows``), imported on first use.
_PACKAGES = ("bpe", "chess", "corpus", "engines", "errors", "grading", "preparing", "report", "serve", "store", "vocab")


__getattr__, __dir__ = lazy_attributes(globals(), _HOMES, _PACKAGES)
