"""Mondrian speed, memory and utility.

(a) UCI Adult (the 30,162 rows without '?'), QI age, education-num, hours-per-week (numeric), sex,
    race (categorical, ARX hierarchies), sensitive occupation, k = 10: cdpbench's Mondrian against
    anonypy 0.2.1's Mondrian; times, speed-up and GCP of both with the same formula.
(b) synthetic tables (3 numeric + 2 categorical QIs), k = 10: time and peak memory, each size in a
    subprocess of its own so ``ru_maxrss`` is its own peak.
(c) the same Adult task as whole processes, as a user runs it: a fresh Python reads Adult's CSV,
    anonymizes it with k = 10 and writes the anonymized table as CSV — cdpbench's Mondrian through
    its plugin registry, anonypy 0.2.1 through its ``Preserver`` — medians of alternating runs.

    python benchmarks/bench_mondrian.py            # all three
    python benchmarks/bench_mondrian.py adult      # only (a)
    python benchmarks/bench_mondrian.py synthetic  # only (b)
    python benchmarks/bench_mondrian.py whole      # only (c)
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cdpbench.data import History, Publication, Release
from cdpbench.datasets import adult
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy

NUMERIC = ["age", "education-num", "hours-per-week"]
CATEGORICAL = ["sex", "race"]
K = 10
SYNTHETIC_SIZES = (100_000, 1_000_000)
CHILD_FLAG = "--synthetic-child"
WHOLE_FLAG = "--whole-child"
WHOLE_REPEAT = 3


# ---------------------------------------------------------------------------- shared
def publish(release: Release, k: int, categorical: str = "taxonomy") -> tuple[Publication, float]:
    reg = default_registry()
    model = reg.create("privacy_model", "k_anonymity", {"k": k})
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
    ctx = PublishContext(model, mctx, History(), np.random.default_rng(0))
    mondrian = reg.create("anonymizer", "mondrian", {"categorical": categorical})
    t0 = time.perf_counter()
    pub = mondrian.publish(release, ctx)
    elapsed = time.perf_counter() - t0
    report = model.verify(pub, mctx)
    assert report.satisfied, report
    return pub, elapsed


def gcp_of_groups(qi: np.ndarray, group: np.ndarray, schema: Schema, categorical_set: bool) -> float:
    """GCP = sum over records of the mean over QIs of NCP, for records grouped by ``group``:
    numeric NCP = group interval width / domain width; categorical NCP = number of leaves the
    generalized value stands for / domain size, 0 for a single value. ``categorical_set``: the
    generalized value is the set of values present (anonypy); otherwise the smallest covering
    taxonomy node."""
    uniq, g = np.unique(group, return_inverse=True)
    G, n = len(uniq), len(group)
    order = np.argsort(g, kind="stable")
    starts = np.searchsorted(g[order], np.arange(G))
    sizes = np.bincount(g, minlength=G)
    ncp = np.zeros(G)
    for j, a in enumerate(schema.qi):
        col = qi[order, j]
        lo = np.minimum.reduceat(col, starts)
        hi = np.maximum.reduceat(col, starts)
        if a.kind == "numeric":
            ncp += (hi - lo) / a.width
            continue
        L = a.taxonomy.size
        if categorical_set:
            present = np.zeros(G * L, dtype=bool)
            present[g * L + qi[:, j].astype(np.int64)] = True
            leaves = present.reshape(G, L).sum(axis=1)
        else:
            _, c_lo, c_hi = a.taxonomy.covering_range(lo.astype(np.int64), hi.astype(np.int64))
            leaves = c_hi - c_lo + 1
        ncp += np.where(leaves > 1, leaves / L, 0.0)
    ncp /= len(schema.qi)
    return float((ncp * sizes).sum()) if n else 0.0


# ---------------------------------------------------------------------------- (a) Adult
def load_adult() -> tuple[pd.DataFrame, Release]:
    """All 30,162 complete Adult rows as one release, and the same table decoded for anonypy."""
    release = adult.adult_release(NUMERIC + CATEGORICAL, "occupation")
    return release.to_frame(), release


def run_anonypy(frame: pd.DataFrame, k: int) -> tuple[np.ndarray, float]:
    """anonypy's Mondrian partition (the algorithm only, not its output formatting)."""
    from anonypy import mondrian

    df = frame[NUMERIC + CATEGORICAL + ["occupation"]].copy()
    for c in CATEGORICAL + ["occupation"]:
        df[c] = df[c].astype("category")
    t0 = time.perf_counter()
    partitions = mondrian.Mondrian(df, NUMERIC + CATEGORICAL, "occupation").partition(k=k)
    elapsed = time.perf_counter() - t0
    group = np.full(len(df), -1, dtype=np.int64)
    for i, p in enumerate(partitions):
        group[df.index.get_indexer(p)] = i
    assert (group >= 0).all()
    return group, elapsed


def bench_adult() -> None:
    from cdpbench.metrics import utility

    frame, release = load_adult()
    schema = release.schema
    pub, ours = publish(release, K, "taxonomy")
    pub_set, ours_set = publish(release, K, "set")
    ours_gcp = utility.gcp(pub, release, ncp_range="domain")[0]  # the core metric, over the domain as below
    ours_gcp_set = utility.gcp(pub_set, release, ncp_range="domain")[0]
    local = gcp_of_groups(release.qi[pub.row], pub.group, schema, categorical_set=False)
    assert abs(local - ours_gcp) < 1e-6 * max(1.0, ours_gcp), (local, ours_gcp)
    theirs_group, theirs = run_anonypy(frame, K)
    theirs_gcp = gcp_of_groups(release.qi, theirs_group, schema, categorical_set=True)
    theirs_sizes = np.bincount(theirs_group)

    print(f"(a) Adult, {len(release)} rows, QI {NUMERIC + CATEGORICAL}, sensitive occupation, k={K}")
    rows = [
        ("cdpbench Mondrian (taxonomy)", ours, ours_gcp, pub.n_groups, pub.group_sizes().min()),
        ("cdpbench Mondrian (set)", ours_set, ours_gcp_set, pub_set.n_groups, pub_set.group_sizes().min()),
        ("anonypy 0.2.1 Mondrian", theirs, theirs_gcp, len(theirs_sizes), theirs_sizes.min()),
    ]
    print(f"{'implementation':<30} {'time [s]':>9} {'GCP':>10} {'GCP/n':>7} {'groups':>7} {'min |Q|':>8}")
    for name, t, g, G, kmin in rows:
        print(f"{name:<30} {t:>9.3f} {g:>10.1f} {g / len(release):>7.4f} {G:>7d} {kmin:>8d}")
    print(f"speed-up vs anonypy: {theirs / ours:.0f}x (target >= 10x)   "
          f"GCP ours <= anonypy: {ours_gcp <= theirs_gcp} ({ours_gcp:.1f} vs {theirs_gcp:.1f})")


# ---------------------------------------------------------------------------- (b) synthetic
def synthetic_release(n: int, seed: int = 0) -> Release:
    """3 numeric QIs (age-like integers, a continuous income, hours), 2 categorical (16 leaves in a
    3-level taxonomy, 5 skewed values in a flat one), 10 sensitive values."""
    rng = np.random.default_rng(seed)
    tax16 = Taxonomy.from_paths([[f"v{i}", f"g{i // 4}", f"h{i // 8}", "*"] for i in range(16)])
    tax5 = Taxonomy.flat([f"r{i}" for i in range(5)])
    schema = Schema(
        (
            NumericQI("age", 0, 99),
            NumericQI("income", 0, 1e5),
            NumericQI("hours", 1, 99),
            CategoricalQI("region", tax16),
            CategoricalQI("group", tax5),
        ),
        Sensitive("s", tuple(f"s{i}" for i in range(10))),
    )
    qi = np.column_stack(
        [
            rng.integers(0, 100, n),
            np.round(rng.lognormal(10, 0.5, n).clip(0, 1e5), 2),
            rng.integers(1, 100, n),
            rng.integers(0, 16, n),
            rng.choice(5, n, p=[0.6, 0.2, 0.1, 0.05, 0.05]),
        ]
    ).astype(float)
    return Release(1, schema, np.arange(n, dtype=np.int64), qi, rng.integers(0, 10, n))


def peak_rss_kb() -> int:
    """This process's own peak resident set (kB): ``VmHWM``, which a new program image starts
    afresh. ``ru_maxrss`` is not: on Linux it survives fork and exec, so a child started from a
    big parent reported the parent's peak (424 MB at every size)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def synthetic_child(n: int) -> None:
    release = synthetic_release(n)
    before = peak_rss_kb()
    pub, elapsed = publish(release, K)
    peak = peak_rss_kb()
    print(json.dumps({"n": n, "seconds": elapsed, "peak_mb": peak / 1024, "data_mb": before / 1024,
                      "groups": pub.n_groups, "levels": pub.info["levels"],
                      "accepts_calls": pub.info["accepts_calls"], "min_size": int(pub.group_sizes().min())}))


def bench_synthetic() -> None:
    print(f"(b) synthetic, 3 numeric + 2 categorical QIs, k={K}, each size in its own process")
    print(f"{'records':>10} {'time [s]':>9} {'peak RSS [MB]':>14} {'RSS before [MB]':>16} {'groups':>8} {'levels':>7} {'accepts':>8}")
    for n in SYNTHETIC_SIZES:
        out = subprocess.run([sys.executable, __file__, CHILD_FLAG, str(n)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['n']:>10d} {r['seconds']:>9.2f} {r['peak_mb']:>14.0f} {r['data_mb']:>16.0f} {r['groups']:>8d} "
              f"{r['levels']:>7d} {r['accepts_calls']:>8d}")
    print("targets at 10^6: < 60 s, < 4096 MB peak")


# ---------------------------------------------------------------------------- (c) whole process
# The children import only what their task needs, as a user's script would; the module's own
# imports above are not paid by them (they run the code below with ``python -c``).
WHOLE_OURS = """
import sys
import numpy as np
from cdpbench.data import History
from cdpbench.datasets import adult
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
release = adult.adult_release({qi!r}, "occupation")          # reads adult.data (CSV), drops '?'
reg = default_registry()
model = reg.create("privacy_model", "k_anonymity", {{"k": {k}}})
mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
pub = reg.create("anonymizer", "mondrian", {{}}).publish(
    release, PublishContext(model, mctx, History(), np.random.default_rng(0)))
pub.to_frame().to_csv(sys.argv[1], index=False)
"""
WHOLE_ANONYPY = """
import sys
import pandas as pd
from anonypy import anonypy
df = pd.read_csv({path!r}, names={names!r}, skipinitialspace=True, na_values="?").dropna()
df = df[{cols!r}].reset_index(drop=True)
for c in {cat!r}:
    df[c] = df[c].astype("category")
out = anonypy.Preserver(df, {qi!r}, "occupation").anonymize_k_anonymity(k={k})
pd.DataFrame(out).to_csv(sys.argv[1], index=False)
"""


def bench_whole() -> None:
    import statistics
    import tempfile

    qi = NUMERIC + CATEGORICAL
    scripts = {
        "cdpbench Mondrian": WHOLE_OURS.format(qi=qi, k=K),
        "anonypy 0.2.1 Preserver": WHOLE_ANONYPY.format(
            path=str(adult.DATA_DIR / "adult.data.gz"), names=list(adult.ADULT_COLUMNS),
            cols=qi + ["occupation"], cat=CATEGORICAL + ["occupation"], qi=qi, k=K),
    }
    times: dict[str, list[float]] = {name: [] for name in scripts}
    rows: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(WHOLE_REPEAT):
            for name, code in scripts.items():
                out = Path(tmp) / "out.csv"
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-c", code, str(out)], check=True)
                times[name].append(time.perf_counter() - t0)
                rows[name] = sum(1 for _ in out.open()) - 1
    ours, theirs = (statistics.median(times[n]) for n in scripts)
    print(f"(c) whole process: read Adult's CSV, Mondrian k={K}, write the anonymized CSV "
          f"(median of {WHOLE_REPEAT}, alternating)")
    for name in scripts:
        ts = times[name]
        print(f"  {name:<26} {statistics.median(ts):7.2f} s  ({min(ts):.2f}..{max(ts):.2f})  {rows[name]} rows written")
    print(f"speed-up vs anonypy as whole processes: {theirs / ours:.1f}x (target >= 50x)")


def main() -> None:
    args = sys.argv[1:]
    if CHILD_FLAG in args:
        synthetic_child(int(args[args.index(CHILD_FLAG) + 1]))
        return
    which = {a for a in args if a in ("adult", "synthetic", "whole")} or {"adult", "synthetic", "whole"}
    if "adult" in which:
        bench_adult()
    if "synthetic" in which:
        bench_synthetic()
    if "whole" in which:
        bench_whole()


if __name__ == "__main__":
    main()
