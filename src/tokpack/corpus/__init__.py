"""Corpus preparation: manifests, document cutting and ``prepare()`` with its cache."""

from tokpack.corpus.cache import default_cache_dir
from tokpack.corpus.documents import cut_documents
from tokpack.corpus.manifest import CorpusManifest
from tokpack.corpus.preparation import PrepareProgress, TokenizedCorpus, prepare
from tokpack.corpus.sample import sample_corpus

__all__ = ["CorpusManifest", "PrepareProgress", "TokenizedCorpus", "cut_documents", "default_cache_dir", "prepare", "sample_corpus"]
