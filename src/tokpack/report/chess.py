"""The report of the chess statistics: the three schemes side by side on the same games."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokpack._schema import read_record
from tokpack.report.page import escape, page, table
from tokpack.report.plots import bars


def chess_facts(path: Path) -> dict[str, Any]:
    """``stats.json`` (a :class:`tokpack.chess.jobs.stats.ChessStats`), read and validated."""
    from tokpack.chess.jobs.stats import ChessStats

    return read_record(ChessStats, Path(path)).model_dump(mode="json", by_alias=True)


def chess_section(facts: dict[str, Any]) -> str:
    """The HTML of the chess comparison."""
    schemes = facts["schemes"]
    names = list(schemes)
    plot = bars(names, {"mean": [schemes[n]["mean"] for n in names], "p50": [schemes[n]["p50"] for n in names],
                        "p95": [schemes[n]["p95"] for n in names]},
                title=f"Tokens per game on {facts['n_games']:,} games (framing included)", ylabel="tokens per game",
                lines={"max_len": facts["max_len"]}, highlight=None, test_id="scheme-chart")
    rows = [[f'<b data-testid="scheme-name">{escape(n)}</b>',
             f'<span data-testid="scheme-vocab">{s["vocabulary"]["n_vocab"]:,}</span>',
             f'<span data-testid="scheme-mean">{s["mean"]:.2f}</span>', f"{s['p50']:.1f}", f"{s['p95']:.1f}",
             f"{s['max']:,}", f'<span data-testid="scheme-within">{s["within_max_len"]:.2f}%</span>']
            for n, s in schemes.items()]
    longest = [[f'<code data-testid="bpe-token">{escape(t["token"])}</code>', f"{t['n_chars']}",
                f'<span data-testid="bpe-moves">{t["moves"]:.2f}</span>'] for t in facts["bpe_longest"]]
    return (
        f"<p>{facts['n_games']:,} games of <code>{escape(facts['source'])}</code>, encoded whole by each scheme; "
        f"max_len {facts['max_len']:,}.</p>{plot}"
        + table(["scheme", "vocabulary", "mean", "p50", "p95", "max", f"within {facts['max_len']}"], rows,
                numeric=(1, 2, 3, 4, 5, 6), test_id="scheme-table")
        + ("<h2>Longest BPE tokens</h2>" + table(["token (spaceless UCI)", "characters", "moves"], longest, numeric=(1, 2))
           if longest else "")
    )


def chess_report(path: Path) -> str:
    """A self-contained HTML report of chess statistics (``tokpack chess tokenize --stats``)."""
    facts = chess_facts(path)
    return page(f"tokpack report: chess schemes ({Path(path).name})", chess_section(facts), data={"chess": facts})
