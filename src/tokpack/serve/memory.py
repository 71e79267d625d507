"""Small packs made from Python lists: for examples, doctests and unit tests."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tokpack.store import DocumentCut, PackWriter, Source, Span
from tokpack.vocab.identity import VocabIdentity


def pack_of_documents(
    documents: Sequence[Sequence[int]],
    *,
    n_vocab: int,
    directory: Path | None = None,
    train_documents: int | None = None,
    pad_id: int | None = None,
) -> Path:
    """Write ``documents`` as a pack and return its directory.

    The vocabulary identity hashes ``n_vocab`` alone (scheme ``"list"``). The first
    ``train_documents`` documents (all by default) form the ``train`` range, the rest
    ``validation``. ``pad_id``, if given, is recorded as the padding id.

    >>> from tokpack.store import Pack
    >>> Pack(pack_of_documents([[1, 2], [3]], n_vocab=4)).starts.tolist()
    [0, 2]
    """
    directory = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="tokpack-")) / "pack"
    identity = VocabIdentity(scheme="list", sha256=hashlib.sha256(b"list:%d" % n_vocab).hexdigest(), n_vocab=n_vocab)
    split = len(documents) if train_documents is None else train_documents
    with PackWriter(directory, vocabulary=identity) as writer:
        writer.add_documents(documents[:split])
        ranges = {"train": Span(documents=(0, writer.n_docs), tokens=(0, writer.n_tokens))}
        first_doc, first_token = writer.n_docs, writer.n_tokens
        writer.add_documents(documents[split:])
        if split < len(documents):
            ranges["validation"] = Span(documents=(first_doc, writer.n_docs), tokens=(first_token, writer.n_tokens))
        source = Source(name="<memory>", sha256=hashlib.sha256(repr(documents).encode()).hexdigest(), n_bytes=0)
        writer.commit(source=source, cut=DocumentCut(rule="list"), ranges=ranges, pad_id=pad_id)
    return directory
