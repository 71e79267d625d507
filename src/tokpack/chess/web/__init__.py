"""The browser twin of the chess encoders: ``vocab.json`` per scheme and a dependency-free JS module.

``export_web(out, bpe)`` writes ``out/tokpack-chess.js`` (this folder's module), and for each
scheme ``out/<scheme>/vocab.json`` (a :class:`WebVocab`: token -> id and the identity record);
the bpe scheme also gets its ``tokenizer.json``. The module's ``encodeUci``, ``encodeSan`` and
``encodeBpe`` give the ids tokpack's encoders give (``tests/fixtures/chess_parity.json``).
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from tokpack._atomic import building
from tokpack._schema import Record, write_record
from tokpack.chess.schemes import make_encoder
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    from tokpack.chess.schemes.game_encoder import GameEncoder
    from tokpack.chess.schemes.uci_bpe import BpeEncoder

MODULE = "tokpack-chess.js"


class EloBins(Record):
    """How the uci scheme bins a rating (the tokens in bin order, the missing rating's last)."""

    lowest_edge: int
    width: int
    n_bins: int
    tokens: list[str]


class WebVocab(Record):
    """``<scheme>/vocab.json``: every token's id, and the identity a pack of the scheme records."""

    schema_: Literal["tokpack.chess.web-vocab.v1"] = Field(default="tokpack.chess.web-vocab.v1", alias="schema")
    scheme: str
    identity: VocabIdentity
    tokens: dict[str, int]
    elo: EloBins | None = None


def web_vocab(encoder: GameEncoder) -> WebVocab:
    """The vocab.json record of one encoder."""
    from tokpack.chess.schemes import uci

    elo = None
    if encoder.scheme == "uci":
        elo = EloBins(lowest_edge=uci.ELO_LOWEST_EDGE, width=uci.ELO_BIN_WIDTH, n_bins=uci.ELO_N_BINS,
                      tokens=[uci._elo_token(i) for i in range(uci.ELO_N_BINS + 1)])
    listed: list[str] = encoder.tokens  # type: ignore[attr-defined]  # each scheme's encoder lists them; the protocol does not
    return WebVocab(scheme=encoder.scheme, identity=encoder.identity,
                    tokens={token: i for i, token in enumerate(listed)}, elo=elo)


def export_web(out: Path, bpe: BpeEncoder | None = None) -> list[Path]:
    """Write the JS module and each scheme's vocab.json (bpe only when given) into a new folder ``out``.

    Raises:
        InputError: ``out`` exists.
    """
    out = Path(out)
    if out.exists():
        raise InputError("already exists; choose a new folder", where=out)
    encoders = [make_encoder("uci"), make_encoder("san")] + ([make_encoder("bpe", bpe)] if bpe is not None else [])
    with building(out) as staging:
        (staging / MODULE).write_text(files(__package__).joinpath(MODULE).read_text(encoding="utf-8"), encoding="utf-8")
        for encoder in encoders:
            (staging / encoder.scheme).mkdir()
            write_record(web_vocab(encoder), staging / encoder.scheme / "vocab.json")
        if bpe is not None:
            (staging / "bpe" / "tokenizer.json").write_text(json.dumps(json.loads(bpe.tokenizer.to_str())),
                                                            encoding="utf-8")
    return [out / MODULE, *(out / e.scheme / "vocab.json" for e in encoders)]
