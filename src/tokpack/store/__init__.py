"""The pack store: the on-disk format, its streaming writer and its verifying reader."""

from tokpack.store.format import DocumentCut, PackMeta, Source, Span, token_dtype
from tokpack.store.reader import Pack
from tokpack.store.writer import PackWriter

__all__ = ["DocumentCut", "Pack", "PackMeta", "PackWriter", "Source", "Span", "token_dtype"]
