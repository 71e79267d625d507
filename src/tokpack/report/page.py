"""Self-contained HTML pages: inline CSS, inline SVG, the data they show embedded as JSON."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

_STYLE = """
:root { color-scheme: light; --ink: #1d2330; --muted: #5b6475; --line: #d9dde5; --accent: #2f6fdb; --bad: #c0392b; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); margin: 0; padding: 1rem; max-width: 1100px; margin-inline: auto; }
h1 { font-size: 1.5rem; margin: .2rem 0 1rem; } h2 { font-size: 1.15rem; margin: 1.6rem 0 .5rem; border-bottom: 1px solid var(--line); }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
td.num, th.num { text-align: right; } code, .mono { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: .9em; word-break: break-all; }
.ok { color: #1e7d32; font-weight: 600; } .bad { color: var(--bad); font-weight: 600; } .muted { color: var(--muted); }
figure { margin: .5rem 0; } figure svg { width: 100%; height: auto; max-width: 100%; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(12rem, 1fr)); gap: .6rem; }
.card { border: 1px solid var(--line); border-radius: .4rem; padding: .5rem .7rem; }
.card b { display: block; font-size: 1.2rem; }
@media (max-width: 600px) { body { padding: .5rem; font-size: 14px; } th, td { padding: .25rem; } }
"""


def escape(value: Any) -> str:
    """HTML-escape ``value`` as text."""
    return html.escape(str(value), quote=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, numeric: Sequence[int] = (), test_id: str = "") -> str:
    """An HTML table; the columns in ``numeric`` are right-aligned."""
    head = "".join(f'<th class="{"num" if i in numeric else ""}">{escape(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"num" if i in numeric else ""}">{cell}</td>' for i, cell in enumerate(row)) + "</tr>"
        for row in rows
    )
    marker = f' data-testid="{escape(test_id)}"' if test_id else ""
    return f"<table{marker}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str, *, data: Any, script: str = "") -> str:
    """A whole page. ``data`` is embedded as ``<script type="application/json" id="report-data">``
    so what the page shows can be checked against what it was made from."""
    # Inside <script>, "</script" ends the element and "<!--" starts a state that can swallow the
    # rest of the page; with no "<", ">" or "&" left (JSON allows them as \u escapes) neither occurs.
    payload = (
        json.dumps(data, ensure_ascii=True, sort_keys=True)
        .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1>{body}"
        f"<script type=\"application/json\" id=\"report-data\">{payload}</script>"
        + (f"<script>{script}</script>" if script else "")
        + "</body></html>\n"
    )
