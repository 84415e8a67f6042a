"""Plots drawn with matplotlib (Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

MAIN = ("gcp_norm", "rl_norm", "kl", "query_error_mean", "suppressed_fraction", "violations")
BELIEF = ("gain_rho", "gain_g", "confidence")


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


def lines_plot(series: dict[str, pd.Series], metric: str, path: Path, title: str = "", xlabel: str = "release") -> Path:
    """One line per configuration: ``metric`` against release (or another x)."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    cmap = plt.get_cmap("tab10")
    styles = ["-", "--", ":", "-."]
    markers = "osD^v<>ph*"
    for i, (label, s) in enumerate(sorted(series.items())):
        ax.plot(s.index, s.values, label=label, color=cmap(i % 10), linestyle=styles[i % 4],
                marker=markers[i % len(markers)], ms=4)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} against release")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def scatter_plot(points: dict[str, tuple[pd.Series, pd.Series]], xlabel: str, ylabel: str, path: Path, title: str = "") -> Path:
    """One series of points per configuration (e.g. an R-U map: one point per release)."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    cmap = plt.get_cmap("tab10")
    markers = "osD^v<>ph*"
    for i, (label, (x, y)) in enumerate(sorted(points.items())):
        ax.scatter(x.values, y.values, label=label, color=cmap(i % 10), marker=markers[i % len(markers)], s=22, alpha=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
