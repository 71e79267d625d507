"""Preparing a corpus: ``prepare()`` reads it, trains or loads the vocabulary, encodes, packs and
caches; :class:`TokenizedCorpus` is the result; its settings as records: :class:`CorpusReading`,
:class:`VocabularyRequest`, :class:`Execution`."""

from tokpack._progress import PrepareProgress
from tokpack.preparing.options import CorpusReading, Execution, VocabularyRequest
from tokpack.preparing.preparation import TokenizedCorpus, prepare

__all__ = ["CorpusReading", "Execution", "PrepareProgress", "TokenizedCorpus", "VocabularyRequest", "prepare"]
