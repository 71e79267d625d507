"""Plots as inline SVG, drawn by matplotlib (the ``report`` extra)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from tokpack.errors import MissingExtra


def _pyplot() -> ModuleType:
    try:
        import matplotlib
    except ImportError:
        raise MissingExtra("reports need matplotlib: pip install 'tokpack[report]'") from None
    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 10, "svg.hashsalt": "tokpack"})
    return plt


def _svg(figure: Any) -> str:  # a matplotlib Figure (matplotlib is imported when a plot is drawn)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog: it is inline


def spans_decades(values: np.ndarray, *, decades: float = 2.0) -> bool:
    """Whether positive ``values`` span at least ``decades`` powers of ten (then a linear axis
    crushes all but the longest into one bar, and a log axis is drawn).

    >>> spans_decades(np.array([3, 40, 5000])), spans_decades(np.array([300, 900]))
    (True, False)
    """
    positive = values[values > 0]
    return bool(len(positive)) and float(np.log10(positive.max() / positive.min())) >= decades


def _legend_outside(axes: Any) -> None:  # a matplotlib Axes
    # Beside the plot, never over it: a legend inside the axes hides whatever data lies under it.
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, framealpha=0.9)


def histogram(values: np.ndarray, *, title: str, xlabel: str, marks: dict[str, float], test_id: str) -> str:
    """A histogram of ``values`` with vertical lines at ``marks`` (label -> x); the x axis is
    logarithmic (log-spaced bins) when the values span decades, and the legend sits beside it."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 3.2))
    log = spans_decades(values)
    if len(values):
        count = min(60, max(5, int(np.sqrt(len(values)))))
        positive = values[values > 0]
        bins = np.geomspace(positive.min(), positive.max() * 1.0001, count + 1) if log else count
        axes.hist(positive if log else values, bins=bins, color="#2f6fdb", alpha=0.85)
    if log:
        axes.set_xscale("log")
    for index, (label, x) in enumerate(marks.items()):
        axes.axvline(x, color=["#c0392b", "#8e44ad", "#16a085"][index % 3], linestyle="--", label=f"{label} = {x:,.0f}")
    axes.set_title(title)
    axes.set_xlabel(xlabel + (" (log scale)" if log else ""))
    axes.set_ylabel("documents")
    if marks:
        _legend_outside(axes)
    scale = "log" if log else "linear"
    return f'<figure data-testid="{test_id}" data-x-scale="{scale}" data-legend="outside">{_svg(figure)}</figure>'


def bars(labels: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, ylabel: str,
         lines: dict[str, float], highlight: str | None, test_id: str) -> str:
    """Grouped bars (one group per label, one bar per series), horizontal lines at ``lines`` (label
    -> y), every name in the legend beside the plot."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 3.6))
    width = 0.8 / max(1, len(series))
    positions = np.arange(len(labels))
    for index, (name, values) in enumerate(series.items()):
        drawn = axes.bar(positions + index * width - 0.4 + width / 2, values, width, label=name)
        if highlight is not None and highlight in labels and index == 0:
            drawn[list(labels).index(highlight)].set_edgecolor("#c0392b")
            drawn[list(labels).index(highlight)].set_linewidth(2.5)
    for index, (label, y) in enumerate(lines.items()):
        # Named in the legend beside the plot, never written over the bars.
        axes.axhline(y, color=["#c0392b", "#8e44ad"][index % 2], linestyle=["--", ":"][index % 2], linewidth=1.2, label=label)
    axes.set_xticks(positions, labels)
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    _legend_outside(axes)
    return f'<figure data-testid="{test_id}" data-legend="outside">{_svg(figure)}</figure>'
