"""The chess schemes, registered in one dict, and the small record that rebuilds an encoder anywhere.

Adding a scheme is one entry in :data:`FACTORIES`. An :class:`EncoderRecord` (the scheme's name
and, for a trained scheme, its tokenizer JSON) is what a worker process or another machine needs
to rebuild the very same encoder: ``rebuild(describe(encoder))`` has the same identity.

>>> rebuild(describe(make_encoder("san"))).identity == make_encoder("san").identity
True
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from tokpack._schema import Record
from tokpack.errors import InputError

if TYPE_CHECKING:
    from tokpack.chess.bpe import BpeEncoder
    from tokpack.chess.encoders import GameEncoder


def _uci(bpe: BpeEncoder | None) -> GameEncoder:
    from tokpack.chess.uci import UciEncoder

    return UciEncoder()


def _san(bpe: BpeEncoder | None) -> GameEncoder:
    from tokpack.chess.san import SanEncoder

    return SanEncoder()


def _bpe(bpe: BpeEncoder | None) -> GameEncoder:
    if bpe is None:
        raise InputError(None, "the bpe scheme needs a trained BPE", fix="train one with `tokpack chess tokenize --scheme bpe`")
    return bpe


#: scheme -> factory (given the trained BPE, which only the bpe scheme uses); imports stay lazy,
#: so packing UCI games never imports ``tokenizers``.
FACTORIES: dict[str, Callable[[BpeEncoder | None], GameEncoder]] = {"uci": _uci, "san": _san, "bpe": _bpe}
#: The schemes, in the order the statistics table lists them.
SCHEMES = tuple(FACTORIES)


def make_encoder(scheme: str, bpe: BpeEncoder | None = None) -> GameEncoder:
    """The encoder of ``scheme``; the bpe scheme needs its trained encoder passed in.

    Raises:
        InputError: an unknown scheme, or ``"bpe"`` without a BPE.

    >>> make_encoder("uci").vocab_size()
    2030
    """
    factory = FACTORIES.get(scheme)
    if factory is None:
        raise InputError(None, f"unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    return factory(bpe)


class EncoderRecord(Record):
    """Enough to rebuild an encoder in another process: its scheme, and a trained tokenizer's JSON."""

    schema_: Literal["tokpack.chess.encoder.v1"] = Field(default="tokpack.chess.encoder.v1", alias="schema")
    scheme: str
    tokenizer_json: str | None = None


def describe(encoder: GameEncoder) -> EncoderRecord:
    """The record that :func:`rebuild` turns back into ``encoder``."""
    tokenizer = getattr(encoder, "tokenizer", None)
    return EncoderRecord(scheme=encoder.scheme, tokenizer_json=tokenizer.to_str() if tokenizer is not None else None)


def rebuild(record: EncoderRecord) -> GameEncoder:
    """The encoder a record describes (a BPE uses one thread: a worker is one core)."""
    if record.tokenizer_json is None:
        return make_encoder(record.scheme)
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    from tokenizers import Tokenizer

    from tokpack.chess.bpe import BpeEncoder

    return make_encoder(record.scheme, BpeEncoder(Tokenizer.from_str(record.tokenizer_json)))
