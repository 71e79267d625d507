"""The ``tokpack`` app with every command registered. Read through :mod:`tokpack.cli`
(``tokpack.cli.app``), which imports this module when first asked for it; the app that runs one
command line is :func:`tokpack.cli._root.command_line`'s."""

from __future__ import annotations

from tokpack.cli import corpus, interop, report, serve
from tokpack.cli._root import new_app
from tokpack.cli.bpe import bpe_app
from tokpack.cli.chess import chess_app
from tokpack.cli.tokenizer import app as tokenizer_app

app = new_app()
corpus.register(app)
app.add_typer(tokenizer_app, name="tokenizer")
app.add_typer(chess_app, name="chess")
app.add_typer(bpe_app, name="bpe")
report.register(app, bpe_app)
interop.register(app)
serve.register(app)
