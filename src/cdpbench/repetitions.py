"""Repetitions over seeds: what ``cdpbench report`` draws and tabulates when a sweep runs every
configuration with several seeds (``seed='range(0,10)'``).

* :func:`seed_groups` — the runs of one configuration (everything equal but ``seed``);
* :func:`bands` — per configuration and release, the mean over seeds and its 95% confidence
  interval, a percentile bootstrap over seeds (``scipy.stats.bootstrap``, 2,000 resamples, a
  fixed generator so a report is reproducible);
* :func:`summary` — per configuration, the mean over seeds of each run's mean over releases, with
  its bootstrap interval, and optionally a paired comparison with a baseline configuration: runs
  paired by seed, Student's paired t-test (``scipy.stats.ttest_rel``), its two-sided p-value
  (1 when every seed gives the same value to both, 0 when every seed gives the same non-zero
  difference: the test's variance is then 0);
* :func:`write_tables` — the summary as CSV, Markdown and LaTeX (booktabs rules).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import CdpbenchError

RESAMPLES = 2000
LEVEL = 0.95
_SEED = re.compile(r"(^|[ ,]+)seed=[^ ,]+")


def without_seed(label: str) -> str:
    """A run's label without its ``seed=N`` part (labels are what differs between runs)."""
    return _SEED.sub("", label).strip(" ,") or "all runs"


def seed_groups(runs, labels: dict[str, str]) -> dict[str, list] | None:
    """``{configuration label: runs}`` when some configuration was run with several seeds (each
    run of a group has its own seed), else None."""
    groups: dict[str, list] = {}
    for r in runs:
        groups.setdefault(without_seed(labels[r.info.run_id]), []).append(r)
    if not any(len(g) > 1 for g in groups.values()):
        return None
    for label, g in groups.items():
        seeds = [r.data.params.get("seed") for r in g]
        if len(set(seeds)) != len(seeds):
            return None  # runs that differ by something a label does not show: not repetitions
    return groups


def mean_ci(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over axis 0 (the seeds) and its 95% percentile-bootstrap interval, column by column
    (NaN bounds with fewer than two seeds)."""
    from scipy.stats import bootstrap

    v = np.asarray(values, dtype=float)
    if v.ndim == 1:
        v = v[:, None]
    mean = v.mean(axis=0)
    if len(v) < 2:
        nan = np.full(v.shape[1], np.nan)
        return mean, nan, nan
    res = bootstrap((v,), np.mean, axis=0, confidence_level=LEVEL, n_resamples=RESAMPLES, method="percentile",
                    random_state=np.random.default_rng(0), vectorized=True)
    low, high = np.asarray(res.confidence_interval.low, float), np.asarray(res.confidence_interval.high, float)
    flat = np.ptp(v, axis=0) == 0  # every seed gave the same value: the interval is that value
    return mean, np.where(flat, mean, low), np.where(flat, mean, high)


def bands(groups: dict[str, list], histories: dict, key_of) -> dict[str, pd.DataFrame]:
    """Per configuration: mean, low, high and n (seeds) per release of the metric ``key_of(hist)``
    names (releases that every seed has)."""
    out = {}
    for label, g in groups.items():
        series = [histories[r.info.run_id].get(key_of(histories[r.info.run_id])) for r in g]
        series = [s for s in series if s is not None]
        if not series:
            continue
        table = pd.concat(series, axis=1, join="inner")
        mean, low, high = mean_ci(table.to_numpy().T)
        out[label] = pd.DataFrame({"mean": mean, "low": low, "high": high, "n": len(series)}, index=table.index)
    return out


def summary(groups: dict[str, list], histories: dict, key_of, baseline: str | None = None) -> pd.DataFrame:
    """One row per configuration: seeds, mean of the run means, 95% CI; with ``baseline`` (a
    configuration label) the paired t-test's p-value against it."""
    from scipy.stats import ttest_rel

    per_seed: dict[str, dict[str, float]] = {}
    for label, g in groups.items():
        vals = {}
        for r in g:
            hist = histories[r.info.run_id]
            key = key_of(hist)
            if key is not None:
                vals[r.data.params.get("seed", "")] = float(hist[key].mean())
        per_seed[label] = vals
    if baseline is not None and baseline not in per_seed:
        raise CdpbenchError(f"--baseline {baseline!r} is not a configuration of this sweep; have: {sorted(per_seed)}")
    rows = []
    for label in sorted(per_seed):
        vals = per_seed[label]
        if not vals:
            continue
        mean, low, high = mean_ci(np.array(list(vals.values())))
        row = {"configuration": label, "seeds": len(vals), "mean": float(mean[0]), "ci_low": float(low[0]),
               "ci_high": float(high[0])}
        if baseline is not None:
            common = sorted(set(vals) & set(per_seed[baseline]))
            p = np.nan
            if label != baseline and len(common) >= 2:
                a = np.array([vals[s] for s in common])
                b = np.array([per_seed[baseline][s] for s in common])
                d = a - b
                if np.ptp(d) > 0:
                    p = float(ttest_rel(a, b).pvalue)
                else:  # the same difference for every seed: none (p = 1) or a certain one (p = 0)
                    p = 1.0 if not d.any() else 0.0
            row["paired_seeds"] = len(common) if label != baseline else np.nan
            row[f"p_vs_{baseline}"] = p
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(x: float) -> str:
    return "" if x != x else f"{x:.4g}"


def markdown_table(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (first column left-aligned, the others right)."""
    cells = [[str(c) for c in table.columns]] + [[str(v) for v in row] for row in table.itertuples(index=False)]
    esc = [[c.replace("|", "\\|") for c in row] for row in cells]
    align = [":---"] + ["---:"] * (table.shape[1] - 1)
    lines = ["| " + " | ".join(esc[0]) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in esc[1:]]
    return "\n".join(lines) + "\n"


def write_tables(table: pd.DataFrame, metric: str, stem: Path) -> list[Path]:
    """``stem``.csv (numbers), .md and .tex (``mean [low, high]`` per configuration; LaTeX with
    booktabs' rules: ``\\usepackage{booktabs}``)."""
    csv, md, tex = (Path(f"{stem}{ext}") for ext in (".csv", ".md", ".tex"))  # metric keys hold dots
    table.to_csv(csv, index=False)
    shown = pd.DataFrame({
        "configuration": table["configuration"],
        "seeds": table["seeds"].astype(int),
        f"{metric} (mean [95% CI])": [f"{_fmt(m)} [{_fmt(lo)}, {_fmt(hi)}]" for m, lo, hi in
                                       zip(table["mean"], table["ci_low"], table["ci_high"])],
    })
    for col in [c for c in table.columns if c.startswith("p_vs_")]:
        shown[f"p (paired t, vs {col[5:]})"] = [_fmt(x) for x in table[col]]
    md.write_text(markdown_table(shown))
    tex.write_text(latex_table(shown))
    return [csv, md, tex]


def latex_table(table: pd.DataFrame) -> str:
    """A LaTeX tabular with booktabs rules, text escaped, first column left-aligned."""
    return table.style.hide(axis="index").format(escape="latex", precision=3).format_index(escape="latex", axis=1).to_latex(
        hrules=True, column_format="l" + "r" * (table.shape[1] - 1))
