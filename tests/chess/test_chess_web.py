"""The browser twin: Chromium runs tokpack-chess.js on every game of the parity fixture and gets every id."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from typer.testing import CliRunner

from tokpack.cli import app

from browser import browser_page

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_javascript_twin_reproduces_every_id_of_the_parity_fixture(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["chess", "export-web", str(tmp_path / "web"), "--bpe", str(FIXTURES / "chess_bpe.json")])
    assert result.exit_code == 0, result.output
    web = tmp_path / "web"
    fixture = json.loads((FIXTURES / "chess_parity.json").read_text(encoding="utf-8"))
    for scheme in ("uci", "san", "bpe"):
        vocab = json.loads((web / scheme / "vocab.json").read_text(encoding="utf-8"))
        assert vocab["identity"] == fixture["vocabularies"][scheme]  # the very vocabularies the fixture used
    module = base64.b64encode((web / "tokpack-chess.js").read_bytes()).decode()
    page_html = (
        "<!doctype html><meta charset=utf-8><script type=module>\n"
        # file:// pages may not import modules beside them (CORS); a data: URL holds the same bytes.
        f"import * as tokpack from 'data:text/javascript;base64,{module}';\n"
        f"const uci = {(web / 'uci' / 'vocab.json').read_text()};\n"
        f"const san = {(web / 'san' / 'vocab.json').read_text()};\n"
        f"const bpe = {(web / 'bpe' / 'tokenizer.json').read_text()};\n"
        f"const games = {json.dumps(fixture['games'])};\n"
        "window.encoded = games.map((g) => ({uci: tokpack.encodeUci(uci, g.uci, g.white_elo, g.black_elo, g.result),\n"
        "  san: tokpack.encodeSan(san, g.san, g.result), bpe: tokpack.encodeBpe(bpe, g.uci, g.result)}));\n"
        "</script>")
    (web / "index.html").write_text(page_html, encoding="utf-8")
    with browser_page() as page:
        page.goto((web / "index.html").as_uri())
        page.wait_for_function("window.encoded !== undefined")
        encoded = page.evaluate("window.encoded")
    assert len(encoded) == len(fixture["games"]) >= 20
    for game, ids in zip(fixture["games"], encoded, strict=True):
        assert ids == game["ids"], game["id"]
