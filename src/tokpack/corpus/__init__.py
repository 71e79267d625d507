"""Reading a corpus: input sources, document cutting, manifests and the bundled sample."""

from tokpack.corpus.documents import cut_documents
from tokpack.corpus.manifest import CorpusManifest
from tokpack.corpus.sample import sample_corpus

__all__ = ["CorpusManifest", "cut_documents", "sample_corpus"]
