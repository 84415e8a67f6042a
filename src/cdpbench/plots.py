"""Plots drawn with matplotlib (Agg backend: no display needed). Report figures are written as
PNG and, for papers, PDF and SVG beside it (:func:`save`)."""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

MAIN = ("gcp_norm", "rl_norm", "kl", "query_error_mean", "suppressed_fraction", "violations")
BELIEF = ("gain_rho", "gain_g", "confidence")


FORMATS = (".pdf", ".svg")  # written beside every report figure's PNG


#: the line :func:`save` writes under a figure: where its runs came from (report sets it)
SOURCE_NOTE: ContextVar[str | None] = ContextVar("cdpbench_source_note", default=None)


def save(fig, path: Path) -> Path:
    """``path`` (PNG) and the same figure as PDF and SVG beside it; the runs' source
    (:data:`SOURCE_NOTE`: commit and lock, :func:`cdpbench.provenance.source_note`) in small grey
    type under the axes."""
    note = SOURCE_NOTE.get()
    if note:
        fig.text(0.01, -0.01, note, fontsize=7, color="0.4", ha="left", va="top")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    for ext in FORMATS:
        fig.savefig(Path(path).with_suffix(ext), bbox_inches="tight")
    plt.close(fig)
    return path


def main_metrics(columns: list[str]) -> list[str]:
    """The metrics worth a panel: utility/privacy basics plus every attacker's belief metrics."""
    keys = [c for c in MAIN if c in columns]
    keys += [c for c in columns if any(c.endswith("." + b) for b in BELIEF)]
    return keys


def release_plot(table: pd.DataFrame, path: Path, title: str = "") -> Path:
    """Small multiples: each main metric against release."""
    keys = main_metrics(list(table.columns)) or list(table.columns[:6])
    ncols = 3
    nrows = (len(keys) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 2.8 * nrows), squeeze=False, sharex=True)
    for ax, key in zip(axes.flat, keys):
        ax.plot(table.index, table[key], marker="o", ms=3)
        ax.set_title(key, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("release")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


MARKERS = "osD^v<>ph*"


def _marker(i: int) -> str:
    """Series i's marker: past ten series the colours (tab10) repeat and the marker moves on by one
    every ten, so no two of the first hundred series share both."""
    return MARKERS[(i + i // 10) % len(MARKERS)]


def _draw_lines(ax, series: dict[str, pd.Series], styles_of: dict[str, int], diagonal: bool) -> None:
    cmap = plt.get_cmap("tab10")
    styles = ["-", "--", ":", "-."]
    for label, s in sorted(series.items()):
        i = styles_of[label]
        ax.plot(s.index, s.values, label=label, color=cmap(i % 10), linestyle=styles[i % 4],
                marker=_marker(i), ms=4)
    if diagonal and series:
        xs = pd.concat(list(series.values())).index
        lo, hi = float(xs.min()), float(xs.max())
        ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", linewidth=1, label="y = x")
    ax.grid(alpha=0.3)


def lines_plot(series: dict[str, pd.Series], metric: str, path: Path, title: str = "", xlabel: str = "release",
               diagonal: bool = False) -> Path:
    """One line per configuration: ``metric`` against release (or another x); ``diagonal``
    adds the line y = x."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    _draw_lines(ax, series, {label: i for i, label in enumerate(sorted(series))}, diagonal)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} against release")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, path)


def panels_plot(groups: dict[str, dict[str, pd.Series]], metric: str, path: Path, title: str = "", xlabel: str = "",
                diagonal: bool = False) -> Path:
    """Small multiples: one panel per group (e.g. per data set), one line per configuration in
    each; a line label keeps its colour and style in every panel; one legend for the figure."""
    names = sorted(groups)
    labels = sorted({label for g in groups.values() for label in g})
    styles_of = {label: i for i, label in enumerate(labels)}
    ncols = min(3, len(names))
    nrows = (len(names) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        _draw_lines(ax, groups[name], styles_of, diagonal)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel(metric, fontsize=9)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    handles, legend_labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in legend_labels:
                handles.append(h)
                legend_labels.append(lab)
    fig.legend(handles, legend_labels, fontsize=9, loc="lower center", ncol=min(4, len(legend_labels)),
               bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return save(fig, path)


def scatter_plot(points: dict[str, tuple[pd.Series, pd.Series]], xlabel: str, ylabel: str, path: Path, title: str = "") -> Path:
    """One series of points per configuration (e.g. an R-U map: one point per release)."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    cmap = plt.get_cmap("tab10")
    for i, (label, (x, y)) in enumerate(sorted(points.items())):
        ax.scatter(x.values, y.values, label=label, color=cmap(i % 10), marker=_marker(i), s=22, alpha=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, path)


def band_plot(bands: dict[str, pd.DataFrame], metric: str, path: Path, title: str = "") -> Path:
    """One line per configuration, the mean over seeds against release, with its 95% confidence
    band (``bands[label]``: columns ``mean``, ``low``, ``high`` indexed by release)."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    cmap = plt.get_cmap("tab10")
    styles = ["-", "--", ":", "-."]
    for i, (label, b) in enumerate(sorted(bands.items())):
        ax.plot(b.index, b["mean"], label=label, color=cmap(i % 10), linestyle=styles[i % 4], marker="o", ms=3)
        ax.fill_between(b.index, b["low"], b["high"], color=cmap(i % 10), alpha=0.18, linewidth=0)
    ax.set_xlabel("release")
    ax.set_ylabel(f"{metric} (mean over seeds, 95% CI)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, path)


def matrix_plot(cells: pd.DataFrame, utility: pd.DataFrame, metric: str, path: Path, title: str = "") -> Path:
    """The attack matrix: a heatmap of ``cells`` (defence rows x attacker columns, each cell
    annotated with its value) and, beside each row, the defence's utility metrics as numbers."""
    import numpy as np

    rows, cols = cells.shape
    extra = utility.shape[1]
    fig, axes = plt.subplots(1, 2, figsize=(1.1 * cols + 1.2 * extra + 4, 0.45 * rows + 2.2), squeeze=False,
                             gridspec_kw={"width_ratios": [max(cols, 1), max(extra, 1) * 0.9]})
    ax, ux = axes[0]
    data = cells.to_numpy(dtype=float)
    im = ax.imshow(data, cmap="Reds", aspect="auto")
    ax.set_xticks(range(cols), cells.columns, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(rows), cells.index, fontsize=8)
    finite = data[np.isfinite(data)]
    mid = (finite.min() + finite.max()) / 2 if finite.size else 0
    for i in range(rows):
        for j in range(cols):
            v = data[i, j]
            ax.text(j, i, "" if not np.isfinite(v) else f"{v:.3f}", ha="center", va="center", fontsize=7,
                    color="white" if np.isfinite(v) and v > mid else "black")
    ax.set_xlabel("attacker")
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label=f"mean {metric} over releases")
    ux.set_xlim(-0.5, max(extra, 1) - 0.5)
    ux.set_ylim(ax.get_ylim())  # the same rows as the heatmap
    ux.set_xticks(range(extra), utility.columns, rotation=35, ha="right", fontsize=8)
    ux.set_yticks([])
    for spine in ux.spines.values():
        spine.set_visible(False)
    for i, row in enumerate(utility.to_numpy(dtype=float)):
        for j, v in enumerate(row):
            ux.text(j, i, "" if not np.isfinite(v) else f"{v:.3f}", ha="center", va="center", fontsize=7)
    ux.set_title("utility", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save(fig, path)
