"""Codes of movetext words and kinds of parsed SAN moves: what the Python coder
(:mod:`tokpack.chess.pgn._san_to_uci`) and the compiled scanner (:mod:`tokpack.chess.pgn._san_to_uci_compiled`)
both write and read."""

from __future__ import annotations

#: Kinds of a parsed SAN token.
NORMAL, SHORT_CASTLE, LONG_CASTLE, UNUSUAL = 0, 1, 2, 3
#: Word codes that are not moves (a move's code is its packed fields, >= 0); ASK: decided in Python.
NO_MOVE, SEPARATOR, MANY_MOVES, ASK = -1, -2, -3, -4
