"""Preparing a corpus: ``prepare()`` reads it, trains or loads the vocabulary, encodes, packs and
caches; :class:`TokenizedCorpus` is the result."""

from tokpack._progress import PrepareProgress
from tokpack.preparing.preparation import TokenizedCorpus, prepare

__all__ = ["PrepareProgress", "TokenizedCorpus", "prepare"]
