"""The chess schemes, registered in one dict, and the spec that rebuilds a chess encoder anywhere.

Adding a scheme is one entry in :data:`FACTORIES`. A :class:`ChessEncoderSpec` (the scheme's
name and, for a trained scheme, its tokenizer JSON) is what a worker process or another machine
needs to rebuild the very same encoder; it is the ``spec`` of the ``encoder.json`` that text and
chess jobs share (:mod:`tokpack.engines.encoders`).

>>> encoder_from_spec(encoder_spec(make_encoder("san"))).identity == make_encoder("san").identity
True
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, ValidationError

from tokpack._schema import Record, first_problem
from tokpack.errors import InputError

if TYPE_CHECKING:
    from tokpack.chess.schemes.game_encoder import GameEncoder
    from tokpack.chess.schemes.uci_bpe import BpeEncoder


class PositionSampling(Record):
    """Which positions of a game the position scheme keeps: a deterministic ``sample`` of them
    (1.0: all), drawn by ``seed`` (see :func:`tokpack.chess.schemes.position.positions_kept`)."""

    sample: float = Field(default=1.0, gt=0, le=1)
    seed: int = Field(default=0, ge=0, lt=2**63)


def _uci(bpe: BpeEncoder | None, sampling: PositionSampling | None) -> GameEncoder:
    from tokpack.chess.schemes.uci import UciEncoder

    return UciEncoder()


def _san(bpe: BpeEncoder | None, sampling: PositionSampling | None) -> GameEncoder:
    from tokpack.chess.schemes.san import SanEncoder

    return SanEncoder()


def _bpe(bpe: BpeEncoder | None, sampling: PositionSampling | None) -> GameEncoder:
    if bpe is None:
        raise InputError("the bpe scheme needs a trained BPE", fix="train one first (chess's tokenize with scheme='bpe')")
    return bpe


def _position(bpe: BpeEncoder | None, sampling: PositionSampling | None) -> GameEncoder:
    from tokpack.chess.schemes.position import PositionEncoder

    sampling = sampling or PositionSampling()
    return PositionEncoder(sampling.sample, sampling.seed)


def _char(bpe: BpeEncoder | None, sampling: PositionSampling | None) -> GameEncoder:
    from tokpack.chess.schemes.char import CharEncoder

    return CharEncoder()


#: scheme -> factory (given the trained BPE, which only the bpe scheme uses, and the sampling of
#: positions, which only the position scheme uses); imports stay lazy, so packing UCI games never
#: imports ``tokenizers``.
FACTORIES: dict[str, Callable[[BpeEncoder | None, PositionSampling | None], GameEncoder]] = {
    "uci": _uci, "san": _san, "bpe": _bpe, "char": _char, "position": _position}
#: The schemes, in the order the statistics table lists them (those it compares come first).
SCHEMES = tuple(FACTORIES)


def _trained_bpe(bpe: BpeEncoder | str | os.PathLike[str] | None) -> BpeEncoder | None:
    """The trained BPE ``make_encoder`` was given: itself, or the one its ``tokenizer.json`` path holds.

    Raises:
        InputError: anything else (refused here, not at the first game it would encode).
    """
    if bpe is None:
        return None
    from tokpack.chess.schemes.uci_bpe import BpeEncoder  # only when a BPE is given: uci and san never import tokenizers

    if isinstance(bpe, (str, os.PathLike)):
        return BpeEncoder.load(Path(bpe))
    if isinstance(bpe, BpeEncoder):
        return bpe
    raise InputError(f"bpe must be a trained BpeEncoder or the path of its tokenizer.json, got {type(bpe).__name__}",
                     fix="pass the path (e.g. bpe='games/bpe/tokenizer.json') or BpeEncoder.load(path)")


def make_encoder(scheme: str, bpe: BpeEncoder | str | os.PathLike[str] | None = None,
                 sampling: PositionSampling | None = None) -> GameEncoder:
    """The encoder of ``scheme``; the bpe scheme needs its trained encoder passed in (a
    :class:`~tokpack.chess.schemes.uci_bpe.BpeEncoder`, or the path of the ``tokenizer.json`` it was saved
    to), and the position scheme takes its sampling (default: every position).

    Raises:
        InputError: an unknown scheme, ``"bpe"`` without a BPE, a ``bpe`` that is neither (a
            path is read at once: a missing or invalid file is named here), or sampling for
            another scheme.

    >>> make_encoder("uci").vocab_size()
    2030
    """
    factory = FACTORIES.get(scheme)
    if factory is None:
        raise InputError(f"unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    if sampling is not None and scheme != "position":
        raise InputError(f"the {scheme} scheme keeps whole games; only the position scheme samples positions")
    return factory(_trained_bpe(bpe), sampling)


class ChessEncoderSpec(Record):
    """The ``spec`` of a chess encoder's ``encoder.json``: its scheme, a trained tokenizer's JSON,
    and the position scheme's sampling."""

    scheme: str
    tokenizer_json: str | None = None
    sampling: PositionSampling | None = None


def encoder_spec(encoder: GameEncoder) -> dict[str, object]:
    """What ``encoder.json`` records to rebuild ``encoder`` (see :mod:`tokpack.engines.encoders`)."""
    tokenizer = getattr(encoder, "tokenizer", None)
    fields: dict[str, object] = {"scheme": encoder.scheme,
                                 "tokenizer_json": tokenizer.to_str() if tokenizer is not None else None}
    if encoder.scheme == "position":
        fields["sampling"] = PositionSampling(sample=encoder.sample, seed=encoder.seed)  # type: ignore[attr-defined]
    return ChessEncoderSpec.model_validate(fields).model_dump(exclude_unset=True)


def encoder_from_spec(spec: dict[str, object]) -> GameEncoder:
    """The encoder a spec describes (a BPE uses one thread: a worker is one core).

    Raises:
        InputError: a spec that is not a chess encoder's, or an unknown scheme.
    """
    try:
        checked = ChessEncoderSpec.model_validate(spec)
    except ValidationError as error:
        raise InputError(f"not a chess encoder's spec: {first_problem(error)}") from None
    if checked.tokenizer_json is None:
        return make_encoder(checked.scheme, sampling=checked.sampling)
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    from tokpack.chess.schemes.uci_bpe import BpeEncoder

    return make_encoder(checked.scheme, BpeEncoder.from_json(checked.tokenizer_json, where="its tokenizer_json"))
