"""Plots drawn with matplotlib, as files: on :class:`matplotlib.figure.Figure` objects, without
pyplot, so no display is needed and the session's backend is left alone (a notebook that imports
cdpbench keeps its inline figures). Report figures are written as
PNG and, for papers, PDF and SVG beside it (:func:`save`).

Legends (:func:`legend_entries`): a curve's label is what differs between the runs
(``privacy_model=l_diversity privacy_model.k=5``); the legend shows it sorted by value (numbers
as numbers: k = 2, 5, 10), the key every label shares once as the legend's title and its value
alone in each entry (``l_diversity, k = 5``), and curves equal at every point drawn once under one
entry (``t_closeness, k = 2, 5, 10 (identical)``). Release axes (and any axis whose values are
all whole numbers) get whole-number ticks only."""

from __future__ import annotations

import re
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable

import matplotlib
import pandas as pd
from matplotlib.figure import Figure

MAIN = ("gcp_norm", "rl_norm", "kl", "query_error_mean", "suppressed_fraction", "violations")
BELIEF = ("gain_rho", "gain_g", "confidence")


FORMATS = (".pdf", ".svg")  # written beside every report figure's PNG


def subplots(nrows: int = 1, ncols: int = 1, *, figsize=None, **kwargs):
    """``pyplot.subplots`` on a figure of its own: drawn and saved with the canvas of the file's
    format (Agg for PNG), never registered with pyplot, so nothing needs closing."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


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
    fig, axes = subplots(nrows, ncols, figsize=(4 * ncols, 2.8 * nrows), squeeze=False, sharex=True)
    for ax, key in zip(axes.flat, keys):
        ax.plot(table.index, table[key], marker="o", ms=3)
        ax.set_title(key, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("release")
    whole_number_ticks(axes.flat[0], table.index, release=True)  # the x axis is shared
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


# ----------------------------------------------------------------------------------- axes, legends

#: at most this many releases: a tick at every release; more: whole-number ticks spaced by matplotlib
EVERY_RELEASE_TICKED = 12


def whole_number_ticks(ax, xs, release: bool = False) -> None:
    """Whole-number ticks on the x axis when every x value is a whole number (releases, k, m):
    never 2.5 or 7.5. A release axis of at most :data:`EVERY_RELEASE_TICKED` releases gets a tick
    at every release."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    values = np.unique(np.asarray(list(xs), dtype=float))
    values = values[np.isfinite(values)]
    if not values.size or not np.all(values == np.round(values)):
        return
    if release and values.size <= EVERY_RELEASE_TICKED:
        ax.set_xticks(values.astype(int))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))


_KEY = r"[\w.+~/-]+"
_SEPARATOR = re.compile(rf"(?:, | )(?={_KEY}=)")  # between the key=value parts of a label


def _label_parts(label: str) -> tuple[list[tuple[str, str]], str] | None:
    """``privacy_model=l_diversity privacy_model.k=5 [dk3.gain_rho]`` (report's run labels: parts
    joined by a space or ", ", a metric key in brackets when a run has several) ->
    ``([("privacy_model", "l_diversity"), ("privacy_model.k", "5")], " [dk3.gain_rho]")``;
    None for a label that is not made of ``key=value`` parts (a run name, "all runs")."""
    base, bracket, rest = label.partition(" [")
    suffix = " [" + rest if bracket else ""
    parts = []
    for token in _SEPARATOR.split(base):
        key, eq, value = token.partition("=")
        if not eq or not re.fullmatch(_KEY, key):
            return None
        parts.append((key, value))
    return (parts, suffix) if parts else None


def _value_order(value: str | None) -> tuple:
    """Sort values as numbers when they are numbers (2 < 5 < 10), else as text; missing last."""
    if value is None:
        return (2, 0.0, "")
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def _natural_order(text: str) -> tuple:
    """Text with its numbers compared as numbers (``k5`` before ``k10``)."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text) if t)


def _equal(a: Any, b: Any) -> bool:
    """Two curves identical at every point: series or frames (same index, same values), or
    tuples of them (an R-U map's x and y)."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return isinstance(b, type(a)) and a.equals(b)


def legend_entries(curves: dict[str, Any], merge: bool = True) -> tuple[str | None, list[tuple[str, list[str]]]]:
    """The legend of ``curves`` (``{label: series}``): ``(title, [(entry text, [labels])])``,
    entries sorted by their values (numbers as numbers).

    The first key every label has (``privacy_model``) is the title; an entry shows its value
    alone, then the other parts as ``k = 5`` (a key by its last dotted part when that is unique).
    With ``merge``, curves identical at every point (:func:`_equal`) share one entry, drawn once:
    ``t_closeness, k = 2, 5, 10 (identical)`` when they differ in one part (``k_anonymity /
    l_diversity, k = 10 (identical)`` when that part is the title's), their entries joined by
    `` | `` otherwise. Labels not made of ``key=value`` parts are shown as they are, sorted with
    their numbers as numbers."""
    labels = list(curves)
    parsed = {lab: _label_parts(lab) for lab in labels}
    if not labels:
        return None, []
    if any(p is None for p in parsed.values()):
        title, order = None, sorted(labels, key=_natural_order)

        def text(lab: str) -> str:
            return lab

        def merged(group: list[str]) -> str:
            return " / ".join(group) + " (identical)"
    else:
        keys: list[str] = []
        for lab in labels:
            keys += [k for k, _ in parsed[lab][0] if k not in keys]
        values = {lab: dict(parsed[lab][0]) for lab in labels}
        shared = [k for k in keys if all(k in v for v in values.values())]
        title = shared[0] if shared else None
        if title:
            keys = [title] + [k for k in keys if k != title]
        tails = [k.rsplit(".", 1)[-1] for k in keys]
        name = {k: (t if tails.count(t) == 1 else k) for k, t in zip(keys, tails)}
        order = sorted(labels, key=lambda lab: ([_value_order(values[lab].get(k)) for k in keys], parsed[lab][1]))

        def shown(key: str, value: str) -> str:
            return value if key == title else f"{name[key]} = {value}"

        def text(lab: str) -> str:
            return ", ".join(shown(k, values[lab][k]) for k in keys if k in values[lab]) + parsed[lab][1]

        def merged(group: list[str]) -> str:
            differ = [k for k in keys if len({values[lab].get(k) for lab in group}) > 1]
            suffixes = {parsed[lab][1] for lab in group}
            if len(differ) != 1 or len(suffixes) > 1 or any(differ[0] not in values[lab] for lab in group):
                return " | ".join(text(lab) for lab in group) + " (identical)"
            (d,) = differ
            vals = sorted({values[lab][d] for lab in group}, key=_value_order)
            first = values[group[0]]
            if d == title:
                parts = [" / ".join(vals)] + [shown(k, first[k]) for k in keys if k != d and k in first]
            else:
                parts = [shown(k, first[k]) for k in keys if k != d and k in first] + [f"{name[d]} = {', '.join(vals)}"]
            return ", ".join(parts) + suffixes.pop() + " (identical)"

    groups: list[list[str]] = []
    for lab in order:
        home = next((g for g in groups if merge and _equal(curves[g[0]], curves[lab])), None)
        if home is None:
            groups.append([lab])
        else:
            home.append(lab)
    return title, [(text(g[0]) if len(g) == 1 else merged(g), g) for g in groups]


def _legend(ax_or_fig, title: str | None, **kw):
    return ax_or_fig.legend(title=title, title_fontsize=8 if title else None, alignment="left", **kw)


MARKERS = "osD^v<>ph*"
LINESTYLES = ["-", "--", ":", "-."]


def _marker(i: int) -> str:
    """Series i's marker: past ten series the colours (tab10) repeat and the marker moves on by one
    every ten, so no two of the first hundred series share both."""
    return MARKERS[(i + i // 10) % len(MARKERS)]


def _draw_lines(ax, series: dict[str, pd.Series], entries: list[tuple[str, list[str]]], styles_of: dict[str, int],
                diagonal: bool, release: bool = False) -> None:
    """One line per legend entry (its first curve: the others are identical to it), styled by
    ``styles_of[entry text]``; whole-number ticks (``release``: a release axis,
    :func:`whole_number_ticks`)."""
    cmap = matplotlib.colormaps["tab10"]
    drawn = []
    for text, members in entries:
        present = [m for m in members if m in series]
        if not present:
            continue
        s = series[present[0]]
        i = styles_of[text]
        ax.plot(s.index, s.values, label=text, color=cmap(i % 10), linestyle=LINESTYLES[i % 4], marker=_marker(i), ms=4)
        drawn.append(s)
    if diagonal and drawn:
        xs = pd.concat(drawn).index
        lo, hi = float(xs.min()), float(xs.max())
        ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", linewidth=1, label="y = x")
    if drawn:
        whole_number_ticks(ax, pd.concat(drawn).index, release=release)
    ax.grid(alpha=0.3)


def lines_plot(series: dict[str, pd.Series], metric: str, path: Path, title: str = "", xlabel: str = "release",
               diagonal: bool = False) -> Path:
    """One line per configuration: ``metric`` against release (or another x); ``diagonal``
    adds the line y = x. Identical lines are drawn once (:func:`legend_entries`)."""
    fig, ax = subplots(figsize=(9, 5.5))
    legend_title, entries = legend_entries(series)
    _draw_lines(ax, series, entries, {text: i for i, (text, _) in enumerate(entries)}, diagonal,
                release=xlabel == "release")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} against release")
    _legend(ax, legend_title, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, path)


def panels_plot(groups: dict[str, dict[str, pd.Series]], metric: str, path: Path, title: str = "", xlabel: str = "",
                diagonal: bool = False) -> Path:
    """Small multiples: one panel per group (e.g. per data set), one line per configuration in
    each; a line label keeps its colour and style in every panel; one legend for the figure
    (sorted by value, the shared key as its title; lines are not merged: one identical in one
    panel may differ in another)."""
    names = sorted(groups, key=_natural_order)
    every = {label: s for g in groups.values() for label, s in g.items()}
    legend_title, entries = legend_entries(every, merge=False)
    styles_of = {text: i for i, (text, _) in enumerate(entries)}
    ncols = min(3, len(names))
    nrows = (len(names) + ncols - 1) // ncols
    fig, axes = subplots(nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        _draw_lines(ax, groups[name], entries, styles_of, diagonal)
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
    rank = {text: i for i, (text, _) in enumerate(entries)}
    pairs = sorted(zip(handles, legend_labels), key=lambda p: rank.get(p[1], len(rank)))
    fig.legend([h for h, _ in pairs], [lab for _, lab in pairs], fontsize=9, loc="lower center",
               ncol=min(4, len(pairs)), bbox_to_anchor=(0.5, -0.02), title=legend_title,
               title_fontsize=9 if legend_title else None)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return save(fig, path)


def scatter_plot(points: dict[str, tuple[pd.Series, pd.Series]], xlabel: str, ylabel: str, path: Path, title: str = "") -> Path:
    """One series of points per configuration (e.g. an R-U map: one point per release);
    configurations with the same points are drawn once."""
    fig, ax = subplots(figsize=(9, 5.5))
    cmap = matplotlib.colormaps["tab10"]
    legend_title, entries = legend_entries(points)
    for i, (text, members) in enumerate(entries):
        x, y = points[members[0]]
        ax.scatter(x.values, y.values, label=text, color=cmap(i % 10), marker=_marker(i), s=22, alpha=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend(ax, legend_title, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, path)


def band_plot(bands: dict[str, pd.DataFrame], metric: str, path: Path, title: str = "") -> Path:
    """One line per configuration, the mean over seeds against release, with its 95% confidence
    band (``bands[label]``: columns ``mean``, ``low``, ``high`` indexed by release); identical
    configurations drawn once. ``metric`` is the y axis's label."""
    fig, ax = subplots(figsize=(9, 5.5))
    cmap = matplotlib.colormaps["tab10"]
    legend_title, entries = legend_entries({lab: b[["mean", "low", "high"]] for lab, b in bands.items()})
    for i, (text, members) in enumerate(entries):
        b = bands[members[0]]
        ax.plot(b.index, b["mean"], label=text, color=cmap(i % 10), linestyle=LINESTYLES[i % 4], marker="o", ms=3)
        ax.fill_between(b.index, b["low"], b["high"], color=cmap(i % 10), alpha=0.18, linewidth=0)
    if bands:
        whole_number_ticks(ax, pd.concat([b["mean"] for b in bands.values()]).index, release=True)
    ax.set_xlabel("release")
    ax.set_ylabel(metric)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend(ax, legend_title, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, path)


def _annotate(ax, data, fraction: Callable[[int, int], float]) -> None:
    """Each cell's value, white on dark cells (``fraction(i, j)`` of its colour scale above 0.5)."""
    import numpy as np

    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            v = data[i, j]
            if np.isfinite(v):
                ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=7,
                        color="white" if fraction(i, j) > 0.5 else "black")


def matrix_plot(cells: pd.DataFrame, utility: pd.DataFrame, metric: str, path: Path, title: str = "") -> Path:
    """The attack matrix: a heatmap of ``cells`` (defense rows x attacker columns, each cell
    annotated with its value, one colour scale; rows named as a legend names its entries, the key
    they share as the axis label) and beside it the defenses' utility metrics as
    cells of their own: each utility column on its own scale (light = its lowest value, dark =
    its highest: utility metrics have different units), annotated with its value."""
    import numpy as np

    rows, cols = cells.shape
    extra = utility.shape[1]
    widths = [max(cols, 1)] + ([extra * 0.9] if extra else [])
    fig, axes = subplots(1, len(widths), figsize=(1.1 * cols + 1.2 * extra + 4, 0.45 * rows + 2.2), squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    ax = axes[0][0]
    data = cells.to_numpy(dtype=float)
    finite = data[np.isfinite(data)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    im = ax.imshow(data, cmap="Reds", aspect="auto", vmin=lo, vmax=hi if hi > lo else lo + 1)
    ax.set_xticks(range(cols), cells.columns, rotation=35, ha="right", fontsize=8)
    legend_title, entries = legend_entries({str(label): None for label in cells.index}, merge=False)
    shown = {label: text for text, members in entries for label in members}  # the shared key once, as the axis label
    ax.set_yticks(range(rows), [shown[str(label)] for label in cells.index], fontsize=8)
    _annotate(ax, data, lambda i, j: (data[i, j] - lo) / (hi - lo) if hi > lo else 0.0)
    ax.set_xlabel("attacker")
    ax.set_ylabel(legend_title or "defense")
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label=f"mean {metric} over releases")
    if extra:
        ux = axes[0][1]
        values = utility.to_numpy(dtype=float)
        shade = np.full(values.shape, np.nan)
        for j in range(extra):
            col = values[:, j]
            ok = np.isfinite(col)
            if ok.any():
                c_lo, c_hi = col[ok].min(), col[ok].max()
                shade[ok, j] = (col[ok] - c_lo) / (c_hi - c_lo) if c_hi > c_lo else 0.0
        ux.imshow(np.ma.masked_invalid(shade), cmap="Blues", aspect="auto", vmin=0, vmax=1.4)  # 1.4: dark stays legible
        ux.set_xticks(range(extra), utility.columns, rotation=35, ha="right", fontsize=8)
        ux.set_yticks(range(rows), [""] * rows)
        _annotate(ux, values, lambda i, j: shade[i, j] / 1.4 if np.isfinite(shade[i, j]) else 0.0)
        ux.set_title("utility", fontsize=9)
        ux.set_xlabel("each column its own scale:\nlight = lowest, dark = highest", fontsize=7, color="0.3")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save(fig, path)
