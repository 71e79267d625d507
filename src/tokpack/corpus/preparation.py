"""``prepare()``: tokenize a corpus file once into a cached, verified pack."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tokpack._atomic import building, remove_abandoned
from tokpack.corpus.cache import default_cache_dir, locked
from tokpack.corpus.manifest import CorpusManifest, corpus_manifest, file_sha256
from tokpack.corpus.text import CorpusText, Document
from tokpack.store import DocumentCut, Pack, PackMeta, PackWriter, Source, Span
from tokpack.vocab import GPT2_PATTERN, BpeTokenizer, VocabIdentity, load_vocabulary, train_hf_bytelevel
from tokpack.vocab.bytelevel import VOCABULARY_FILE
from tokpack.vocab.loading import VocabularySpec

if TYPE_CHECKING:
    from tokpack.serve.schedule import TokenBatches

Stage = Literal["hashing", "training", "encoding", "verifying"]
Trainer = Literal["hf", "exact"]


@dataclass(frozen=True)
class PrepareProgress:
    """What :func:`prepare` reports to its ``progress`` callback after each step of work."""

    stage: Stage
    done_bytes: int
    total_bytes: int
    n_tokens: int = 0


ProgressCallback = Callable[[PrepareProgress], None]


class TokenizedCorpus:
    """A prepared corpus: its verified pack and the vocabulary its ids come from."""

    def __init__(self, tokens_dir: Path, vocabulary_path: Path) -> None:
        """Open a prepared corpus (as :func:`prepare` returns it).

        Raises:
            ValueError: the pack does not match its meta, or the vocabulary is not the pack's.
        """
        self.tokens_dir = Path(tokens_dir)
        self.vocabulary_path = Path(vocabulary_path)
        self._pack = Pack(self.tokens_dir)
        vocabulary = BpeTokenizer.load_saved(self.vocabulary_path)
        if vocabulary.identity != self._pack.vocabulary:
            raise ValueError(f"{self.vocabulary_path}: not the vocabulary of {self.tokens_dir}")
        self._tokenizer = vocabulary

    @property
    def manifest(self) -> PackMeta:
        """The pack's ``meta.json``: counts, identity, source, cut, ranges, checksums."""
        return self._pack.meta

    @property
    def vocabulary(self) -> VocabIdentity:
        """The identity record ``{schema, scheme, sha256, n_vocab}`` of the vocabulary."""
        return self._pack.vocabulary

    @property
    def n_vocab(self) -> int:
        """Number of ids, ``<|endoftext|>`` included."""
        return self.vocabulary.n_vocab

    def pack(self) -> Pack:
        """The pack itself (tokens memory map, starts, meta)."""
        return self._pack

    def tokenizer(self) -> BpeTokenizer:
        """The encoder for this corpus's vocabulary."""
        return self._tokenizer

    def batches(self, batch: int, length: int) -> TokenBatches:
        """Training batches over this corpus's training range; see :class:`TokenBatches`."""
        from tokpack.serve.schedule import TokenBatches

        return TokenBatches(self.tokens_dir, batch, length)

    def __repr__(self) -> str:
        meta = self.manifest
        return f"TokenizedCorpus({meta.source.name!r}, n_docs={meta.n_docs}, n_tokens={meta.n_tokens}, vocabulary={self.vocabulary.short})"


def prepare(
    corpus: str | Path,
    *,
    vocab: VocabularySpec | None = None,
    cache_dir: str | Path | None = None,
    vocab_size: int = 50256,
    min_frequency: int = 2,
    vocab_sample_bytes: int = 10_000_000,
    document_bytes: int = 1_048_576,
    batch_documents: int = 16,
    trainer: Trainer = "hf",
    pattern: str | None = None,
    progress: ProgressCallback | None = None,
) -> TokenizedCorpus:
    """Tokenize a corpus text file once, cache the pack, and return it.

    A ``manifest.json`` beside the corpus (see :class:`CorpusManifest`) is checked and its ranges
    used; without one the whole file is training data. Documents are cut by the rule of
    :mod:`tokpack.corpus.documents` and each is encoded alone.

    Args:
        corpus: the UTF-8 text file.
        vocab: your vocabulary (anything :func:`load_vocabulary` takes); ``None`` trains one on
            the first ``vocab_sample_bytes`` of the training range, never validation or test data.
        cache_dir: where packs and vocabularies live; ``$TOKPACK_CACHE`` or ``~/.cache/tokpack``.
        vocab_size: ranks to train, the 256 bytes included (``n_vocab`` is one more, for
            ``<|endoftext|>``); GPT-2's size by default.
        min_frequency: a merge needs a pair seen at least this often.
        vocab_sample_bytes: bytes of the training range the trainer sees.
        document_bytes: the longest document (at least 4).
        batch_documents: documents encoded together (in parallel threads).
        trainer: ``"hf"`` (Hugging Face ``tokenizers``) or ``"exact"`` (tokpack's own).
        pattern: the pre-tokenizer for training, or for a rank file or GPT-2 pair (GPT-2's).
        progress: called with a :class:`PrepareProgress` as work advances.

    Returns:
        The :class:`TokenizedCorpus`.

    Raises:
        ValueError: a non-positive size, a corpus that does not match its manifest, invalid
            UTF-8 (with its byte offset), a bad vocabulary, or a cache that does not match what
            it should hold (delete it to rebuild; it is never rebuilt silently).
        FileNotFoundError: no corpus file.
    """
    corpus = Path(corpus)
    _check_sizes(vocab_size=vocab_size, min_frequency=min_frequency, vocab_sample_bytes=vocab_sample_bytes,
                 document_bytes=document_bytes, batch_documents=batch_documents)
    if not corpus.is_file():
        raise FileNotFoundError(f"{corpus}: no such corpus file")
    report = progress or (lambda _: None)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    total = corpus.stat().st_size
    report(PrepareProgress("hashing", 0, total))
    sha256 = file_sha256(corpus)
    report(PrepareProgress("hashing", total, total))
    manifest = corpus_manifest(corpus, sha256)
    with CorpusText(corpus) as text:
        if vocab is None:
            tokenizer, vocabulary_json = _trained_vocabulary(
                text, manifest, cache, vocab_size=vocab_size, min_frequency=min_frequency,
                sample_bytes=vocab_sample_bytes, document_bytes=document_bytes, trainer=trainer,
                pattern=pattern or GPT2_PATTERN, report=report,
            )
        else:
            tokenizer = load_vocabulary(vocab, pattern=pattern)
            vocabulary_json = _cached_vocabulary(tokenizer, cache / "vocab" / f"user-{tokenizer.identity.short}")
        source = Source(name=corpus.name, sha256=sha256, n_bytes=total)
        cut = DocumentCut(rule="newline", document_bytes=document_bytes)
        pack_dir = cache / "packs" / f"{sha256[:16]}-{tokenizer.identity.short}-d{document_bytes}"
        with locked(pack_dir):
            if pack_dir.exists():
                report(PrepareProgress("verifying", 0, total))
                _check_cached_pack(pack_dir, tokenizer.identity, source, cut, manifest)
            else:
                remove_abandoned(pack_dir)
                _write_pack(text, manifest, tokenizer, pack_dir, source, cut,
                            batch_documents=batch_documents, report=report)
    return TokenizedCorpus(pack_dir, vocabulary_json)


def _check_sizes(**sizes: int) -> None:
    minimums = {"vocab_size": 256, "document_bytes": 4}
    for name, value in sizes.items():
        if not isinstance(value, int) or value < minimums.get(name, 1):
            raise ValueError(f"{name} must be an integer of at least {minimums.get(name, 1)}, got {value!r}")


def _trained_vocabulary(
    text: CorpusText, manifest: CorpusManifest, cache: Path, *, vocab_size: int, min_frequency: int,
    sample_bytes: int, document_bytes: int, trainer: Trainer, pattern: str, report: ProgressCallback,
) -> tuple[BpeTokenizer, Path]:
    pattern_id = hashlib.sha256(pattern.encode()).hexdigest()[:8]
    key = f"{manifest.sha256[:16]}-v{vocab_size}-f{min_frequency}-s{sample_bytes}-d{document_bytes}-{trainer}-p{pattern_id}"
    directory = cache / "vocab" / key
    trained_on: dict[str, str | int] = {
        "corpus_sha256": manifest.sha256, "vocab_size": vocab_size, "min_frequency": min_frequency,
        "sample_bytes": sample_bytes, "document_bytes": document_bytes, "trainer": trainer,
    }
    with locked(directory):
        if directory.exists():
            tokenizer = BpeTokenizer.load_saved(directory / VOCABULARY_FILE)
            if tokenizer.pattern != pattern or _saved_training(directory) != trained_on:
                raise ValueError(f"{directory}: cached vocabulary was trained differently; delete it to retrain")
            return tokenizer, directory / VOCABULARY_FILE
        start, end = manifest.ranges["train"]
        sample_end = min(end, start + sample_bytes)
        report(PrepareProgress("training", 0, sample_end - start))
        texts = (document.text for document in text.documents(start, sample_end, document_bytes))
        train = _trainer(trainer)
        tokenizer = train(texts, vocab_size=vocab_size, min_frequency=min_frequency, pattern=pattern)
        report(PrepareProgress("training", sample_end - start, sample_end - start))
        remove_abandoned(directory)
        with building(directory) as temporary:
            tokenizer.save(temporary, trained_on=trained_on)
    return tokenizer, directory / VOCABULARY_FILE


def _trainer(name: Trainer) -> Callable[..., BpeTokenizer]:
    if name == "hf":
        return train_hf_bytelevel
    if name == "exact":
        from tokpack.bpe import train_bytelevel

        return train_bytelevel
    raise ValueError(f"trainer must be 'hf' or 'exact', got {name!r}")


def _saved_training(directory: Path) -> dict[str, str | int] | None:
    from tokpack._schema import read_record
    from tokpack.vocab.bytelevel import VocabularyRecord

    return read_record(VocabularyRecord, directory / VOCABULARY_FILE).trained_on


def _cached_vocabulary(tokenizer: BpeTokenizer, directory: Path) -> Path:
    with locked(directory):
        if directory.exists():
            if BpeTokenizer.load_saved(directory / VOCABULARY_FILE).identity != tokenizer.identity:
                raise ValueError(f"{directory}: cached vocabulary differs from the one given; delete it")
        else:
            remove_abandoned(directory)
            with building(directory) as temporary:
                tokenizer.save(temporary)
    return directory / VOCABULARY_FILE


def _batches(documents: Iterator[Document], size: int) -> Iterator[list[Document]]:
    while batch := list(islice(documents, size)):
        yield batch


def _write_pack(
    text: CorpusText, manifest: CorpusManifest, tokenizer: BpeTokenizer, pack_dir: Path, source: Source,
    cut: DocumentCut, *, batch_documents: int, report: ProgressCallback,
) -> None:
    assert cut.document_bytes is not None
    done_bytes = 0
    with PackWriter(pack_dir, vocabulary=tokenizer.identity) as writer:
        ranges = {}
        for name, start, end in manifest.ordered_ranges():
            first_doc, first_token = writer.n_docs, writer.n_tokens
            for batch in _batches(text.documents(start, end, cut.document_bytes), batch_documents):
                writer.add_documents(tokenizer.encode_arrays([document.text for document in batch]))
                done_bytes += sum(document.n_bytes for document in batch)
                report(PrepareProgress("encoding", done_bytes, source.n_bytes, writer.n_tokens))
            ranges[name] = Span(documents=(first_doc, writer.n_docs), tokens=(first_token, writer.n_tokens),
                                source_bytes=(start, end))
        writer.commit(source=source, cut=cut, ranges=ranges, pad_id=tokenizer.eot_id)


def _check_cached_pack(pack_dir: Path, identity: VocabIdentity, source: Source, cut: DocumentCut,
                       manifest: CorpusManifest) -> None:
    meta = Pack(pack_dir, verify=True).meta
    expected = {"vocabulary": identity, "source": source, "cut": cut}
    for field, value in expected.items():
        if getattr(meta, field) != value:
            raise ValueError(f"{pack_dir}: cached pack's {field} does not match this corpus; delete it to rebuild")
    ranges = {name: span.source_bytes for name, span in meta.ranges.items()}
    if ranges != {name: tuple(span) for name, span in manifest.ranges.items()}:
        raise ValueError(f"{pack_dir}: cached pack's ranges differ from the corpus manifest; delete it to rebuild")
