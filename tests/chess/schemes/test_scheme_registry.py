"""Chess schemes register in one dict; an encoder is rebuilt from a small record; no import circle."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokpack.chess import schemes

SRC = Path(__file__).resolve().parents[3] / "src"


def test_every_scheme_comes_from_the_one_registry() -> None:
    assert schemes.SCHEMES == tuple(schemes.FACTORIES) == ("uci", "san", "bpe", "char", "position")
    for scheme in ("uci", "san", "char"):
        encoder = schemes.make_encoder(scheme)
        spec = schemes.encoder_spec(encoder)
        assert spec == {"scheme": scheme, "tokenizer_json": None}
        assert schemes.encoder_from_spec(spec).identity == encoder.identity
    with pytest.raises(ValueError, match="unknown scheme 'pgn'"):
        schemes.make_encoder("pgn")
    sampled = schemes.make_encoder("position", sampling=schemes.PositionSampling(sample=0.25, seed=7))
    spec = schemes.encoder_spec(sampled)
    assert spec == {"scheme": "position", "tokenizer_json": None, "sampling": {"sample": 0.25, "seed": 7}}
    rebuilt = schemes.encoder_from_spec(spec)
    assert (rebuilt.sample, rebuilt.seed, rebuilt.identity) == (0.25, 7, schemes.make_encoder("position").identity)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="only the position scheme samples positions"):
        schemes.make_encoder("uci", sampling=schemes.PositionSampling(sample=0.5))


def test_the_game_encoder_module_imports_no_scheme() -> None:
    """The shared protocol and records import none of the schemes that import them."""
    import ast

    tree = ast.parse((SRC / "tokpack" / "chess" / "schemes" / "game_encoder.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"tokpack.chess.schemes", "tokpack.chess.schemes.uci", "tokpack.chess.schemes.san",
                           "tokpack.chess.schemes.uci_bpe", "tokpack.chess.schemes.char", "tokpack.chess.schemes.position"}
