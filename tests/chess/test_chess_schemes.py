"""Chess schemes register in one dict; an encoder is rebuilt from a small record; no import circle."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokpack.chess import schemes

SRC = Path(__file__).resolve().parents[2] / "src"


def test_every_scheme_comes_from_the_one_registry() -> None:
    assert schemes.SCHEMES == tuple(schemes.FACTORIES) == ("uci", "san", "bpe")
    for scheme in ("uci", "san"):
        encoder = schemes.make_encoder(scheme)
        spec = schemes.encoder_spec(encoder)
        assert spec == {"scheme": scheme, "tokenizer_json": None}
        assert schemes.encoder_from_spec(spec).identity == encoder.identity
    with pytest.raises(ValueError, match="unknown scheme 'pgn'"):
        schemes.make_encoder("pgn")


def test_encoders_module_imports_no_scheme() -> None:
    """The shared records no longer import the schemes that import them (issue 13)."""
    import ast

    tree = ast.parse((SRC / "tokpack" / "chess" / "encoders.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"tokpack.chess.uci", "tokpack.chess.san", "tokpack.chess.bpe", "tokpack.chess.schemes"}
