"""Plots as inline SVG, drawn by matplotlib (the ``report`` extra)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from tokpack.errors import MissingExtra


def _pyplot():  # type: ignore[no-untyped-def]
    try:
        import matplotlib
    except ImportError:
        raise MissingExtra("reports need matplotlib: pip install 'tokpack[report]'") from None
    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 10, "svg.hashsalt": "tokpack"})
    return plt


def _svg(figure) -> str:  # type: ignore[no-untyped-def]
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog: it is inline


def histogram(values: np.ndarray, *, title: str, xlabel: str, marks: dict[str, float], test_id: str) -> str:
    """A histogram of ``values`` with vertical lines at ``marks`` (label -> x)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 3.2))
    if len(values):
        axes.hist(values, bins=min(60, max(5, int(np.sqrt(len(values))))), color="#2f6fdb", alpha=0.85)
    for index, (label, x) in enumerate(marks.items()):
        axes.axvline(x, color=["#c0392b", "#8e44ad", "#16a085"][index % 3], linestyle="--", label=f"{label} = {x:,.0f}")
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("documents")
    if marks:
        axes.legend(loc="upper right")
    return f'<figure data-testid="{test_id}">{_svg(figure)}</figure>'


def bars(labels: Sequence[str], series: dict[str, Sequence[float]], *, title: str, ylabel: str,
         lines: dict[str, float], highlight: str | None, test_id: str) -> str:
    """Grouped bars (one group per label, one bar per series), horizontal lines at ``lines``."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 3.6))
    width = 0.8 / max(1, len(series))
    positions = np.arange(len(labels))
    for index, (name, values) in enumerate(series.items()):
        drawn = axes.bar(positions + index * width - 0.4 + width / 2, values, width, label=name)
        if highlight in labels and index == 0:
            drawn[list(labels).index(highlight)].set_edgecolor("#c0392b")
            drawn[list(labels).index(highlight)].set_linewidth(2.5)
    for label, y in lines.items():
        axes.axhline(y, color="#c0392b", linestyle="--", linewidth=1)
        axes.annotate(f"{label} {y:g}", (len(labels) - 0.5, y), ha="right", va="bottom", color="#c0392b")
    axes.set_xticks(positions, labels)
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    axes.legend(loc="best", framealpha=0.9)
    return f'<figure data-testid="{test_id}">{_svg(figure)}</figure>'
