"""Speed of the JS-reduce pieces on synthetic data shaped like BKseq (§7.1).

* configuration_posterior (the exact configuration posterior, JS-reduce §5.2): 5,000 records in
  QI-groups of 3–10, and one group of 1,000; the classic Ω-estimate on the same input for scale;
* JSReduce.publish (Algorithm 4) with the js_reduce model (k=3, t=0.5, j=0.6) on one
  5,000-record view: QIs age 45–74, gender 1–2, weight 60–89; 17 sensitive values; the beliefs of
  each record a Dirichlet draw (concentration 50) around the base distribution of its
  age × weight × gender class (18 classes, as BKseq's BK_sv; each class base itself a Dirichlet
  draw, concentration 40, around one overall distribution), its sensitive value drawn from its
  own beliefs; leftovers
  suppressed and merged; plus j=0.2 (the strictest j of the paper's Table 5) and a view whose 18
  class distributions are unrelated (each a flat Dirichlet draw), to show Algorithm 4 getting
  stuck: once no prefix from the current start is ever accepted, every later record is left
  over, and every prefix of that tail is asked about (quadratic in its length).

Times are the best of 5 runs (one run when it takes over 0.5 s). Run: ``python benchmarks/bench_js_reduce.py`` (or ``make bench``);
``--million``: one publish of 10^6 such records instead (set aside after 32, suppress and merge).
``--out FILE``: also write what is measured as a tidy results CSV (``run,metric,step,value``; step
the number of records; times ``wall_s``), which ``cdpbench tables`` renders into
``plugins/cdpbench-jsreduce/README.md``:
``python benchmarks/bench_js_reduce.py --million --out experiments/results/bench_js_reduce_million.csv``.
``--bkseq-views``: the real bkseq data set instead (default parameters: 24 views of ~5,000 tuples,
seed 0), run through the release loop as ``cdpbench dataset=bkseq +experiment/matrix/defense=js_reduce``
runs it (the defender's DK 3-step beliefs revised after every view; no attacker, no metrics), and
JSReduce.publish (k=3, t=0.5, j=0.6, leftovers merged, max_group 32: the matrix preset) timed on
every view, best of 3; prints the per-view times and the largest (issue #28: one bkseq view <= 0.2 s),
and with ``--out`` writes rows ``bkseq_view,wall_s,<view>,<s>`` (and the view's records, groups,
merged and suppressed leftovers, the leftovers and prefix rows the compiled loops left to NumPy)
plus ``bkseq_view_max``.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cdpbench.data import History, Release
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.tables import write_results
from cdpbench.taxonomy import Taxonomy
from cdpbench_jsreduce.estimators.configuration import configuration_posterior

M = 17
CLASS_CONCENTRATION = 40.0  # how close each class's base distribution is to the overall one
N = 5000
REPEAT = 5


def slug(label: str) -> str:
    """A run name from a case label: ``"similar classes, j=0.6, merge"`` -> ``similar_classes_j0.6_merge``."""
    return re.sub(r"[^\w.]+", "_", label.replace("=", "")).strip("_")


def best_of(fn, repeat: int = REPEAT) -> tuple[float, object]:
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        if best > 0.5:  # slow cases: one run says enough
            break
    return best, out


def bkseq_like_view(
    rng: np.random.Generator, n: int = N, concentration: float = 50.0, class_concentration: float | None = CLASS_CONCENTRATION
) -> tuple[Release, np.ndarray]:
    schema = Schema(
        (NumericQI("age", 45, 74), CategoricalQI("gender", Taxonomy.flat(["1", "2"])), NumericQI("weight", 60, 89)),
        Sensitive("ex_res", tuple(f"v{i}" for i in range(M))),
    )
    age = rng.integers(45, 75, n)
    gender = rng.integers(1, 3, n)
    weight = rng.integers(60, 90, n)
    klass = ((age - 45) // 10) * 6 + (gender - 1) * 3 + (weight - 60) // 10
    overall = rng.dirichlet(np.ones(M))
    if class_concentration is None:  # unrelated classes
        base = rng.dirichlet(np.ones(M), size=18)
    else:
        base = rng.dirichlet(class_concentration * overall + 1e-3, size=18)
    if n <= 100_000:
        prior = np.vstack([rng.dirichlet(concentration * base[c] + 1e-3) for c in klass])
    else:  # the same distribution, drawn at once (Dirichlet = normalized Gammas)
        gamma = rng.standard_gamma(concentration * base[klass] + 1e-3)
        prior = gamma / gamma.sum(axis=1, keepdims=True)
    sensitive = (prior.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    frame = pd.DataFrame(
        {"id": np.arange(n), "age": age, "gender": gender.astype(str), "weight": weight, "ex_res": [f"v{s}" for s in sensitive]}
    )
    return schema.encode(frame, 1), prior


def bench_posterior(rng: np.random.Generator) -> list[tuple]:
    reg = default_registry()
    omega = reg.create("estimator", "omega")
    sizes = rng.integers(3, 11, N)
    sizes = sizes[: np.searchsorted(np.cumsum(sizes), N) + 1]
    segment = np.repeat(np.arange(len(sizes)), sizes)[:N]
    G = int(segment.max()) + 1
    rows = [("groups of 3-10", segment, G), ("one group of 1,000", np.zeros(1000, dtype=np.int64), 1)]
    print(f"{'estimator input':<24}{'records':>9}{'groups':>8}{'configuration ms':>18}{'omega ms':>10}")
    out = []
    for label, seg, g in rows:
        n = len(seg)
        weights = rng.dirichlet(np.full(M, 0.5), size=n)
        sensitive = rng.integers(0, M, n)
        t_conf, post = best_of(lambda: configuration_posterior(weights, sensitive, seg, g, M))
        t_omega, _ = best_of(lambda: omega.posterior(weights, sensitive, seg, g, M))
        assert np.allclose(post.sum(axis=1), 1.0)
        print(f"{label:<24}{n:>9}{g:>8}{1e3 * t_conf:>18.2f}{1e3 * t_omega:>10.2f}")
        out += [(f"configuration_{slug(label)}", "wall_s", n, t_conf), (f"configuration_{slug(label)}", "groups", n, g),
                (f"omega_{slug(label)}", "wall_s", n, t_omega), (f"omega_{slug(label)}", "groups", n, g)]
    return out


def bench_publish(rng: np.random.Generator) -> list[tuple]:
    reg = default_registry()
    views = {"similar classes": bkseq_like_view(rng), "unrelated classes": bkseq_like_view(rng, class_concentration=None)}
    print(f"\n{'JSReduce.publish, 5,000 records':<44}{'time s':>8}{'groups':>8}{'accepts':>9}{'suppressed':>12}{'verify':>8}")
    cases = [("similar classes", j, lo) for j in (0.6, 0.2) for lo in ("suppress", "merge")]
    cases += [("unrelated classes", 0.6, lo) for lo in ("suppress", "merge")]
    out = []
    for view, j, leftovers in cases:
        release, prior = views[view]
        model = reg.create("privacy_model", "js_reduce", {"k": 3, "closeness": {"t": 0.5}, "j": j})
        mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
        model.prepare(release, mctx)
        anon = reg.create("anonymizer", "js_reduce", {"leftovers": leftovers})
        ctx = PublishContext(model, mctx, History(), np.random.default_rng(0), prior)
        elapsed, pub = best_of(lambda: anon.publish(release, ctx))
        report = model.verify(pub, mctx)
        label = f"{view}, j={j}, {leftovers}"
        print(
            f"{label:<44}{elapsed:>8.3f}{pub.n_groups:>8}{pub.info['accepts_calls']:>9}"
            f"{len(pub.suppressed):>12}{'ok' if report.satisfied else 'FAIL':>8}"
        )
        run = f"publish_{slug(label)}"
        out += [(run, "wall_s", len(release), elapsed), (run, "groups", len(release), pub.n_groups),
                (run, "accepts_calls", len(release), pub.info["accepts_calls"]),
                (run, "suppressed", len(release), len(pub.suppressed)), (run, "verifies", len(release), report.satisfied)]
    return out


def bench_million(rng: np.random.Generator, n: int = 1_000_000) -> list[tuple]:
    """Speed issue, acceptance 3: 10^6 records through the js_reduce anonymizer (k=3, t=0.5, j=0.6)."""
    out = []
    reg = default_registry()
    release, prior = bkseq_like_view(rng, n=n)
    model = reg.create("privacy_model", "js_reduce", {"k": 3, "closeness": {"t": 0.5}, "j": 0.6})
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    model.prepare(release, mctx)
    for leftovers in ("suppress", "merge"):
        anon = reg.create("anonymizer", "js_reduce", {"leftovers": leftovers, "max_group": 32})
        ctx = PublishContext(model, mctx, History(), np.random.default_rng(0), prior)
        t0 = time.perf_counter()
        pub = anon.publish(release, ctx)
        elapsed = time.perf_counter() - t0
        print(f"JSReduce.publish, {n:,} records, {leftovers}: {elapsed:.2f} s, {pub.n_groups} groups, "
              f"{len(pub.suppressed)} suppressed (target <= 10 s)")
        run = f"million_{leftovers}"
        out += [(run, "wall_s", n, elapsed), (run, "groups", n, pub.n_groups), (run, "suppressed", n, len(pub.suppressed))]
    return out


BKSEQ_OVERRIDES = ["dataset=bkseq", "+experiment/matrix/defense=js_reduce", "attacker=none"]
BKSEQ_METRICS = ("belief", "kl_divergence", "publication_info", "query_error", "record_linkage", "utility")


def bench_bkseq_views(repeat: int = 3) -> list[tuple]:
    """Issue #28: JSReduce.publish on every view of the real bkseq data set (default parameters,
    seed 0), with the defender's beliefs of the release loop; best of ``repeat`` per view."""
    from cdpbench import launch, runner
    from cdpbench.presets import conf_dir
    from cdpbench_jsreduce.anonymizers import js_reduce as js_anonymizer

    hydra = launch.hydra_instance(conf_dir())
    overrides = BKSEQ_OVERRIDES + [f"metrics.{m}.enabled=false" for m in BKSEQ_METRICS]
    cfg = launch.prepare(hydra, overrides, multirun=False).jobs[0].cfg
    comp = runner.build(cfg)
    publish = comp.anonymizer.publish
    out: list[tuple] = []
    worst = (0.0, 0)
    print(f"{'bkseq view':>10}{'records':>9}{'time s':>8}{'groups':>8}{'merged':>8}{'suppressed':>12}{'fallbacks':>11}{'prefix rows':>13}")

    def timed(release, ctx):
        best, pub = np.inf, None
        counts = js_anonymizer.MERGE_COUNTS
        for _ in range(repeat):
            before = dict(counts)
            t0 = time.perf_counter()
            pub = publish(release, ctx)
            best = min(best, time.perf_counter() - t0)
        fallbacks = counts["fallback"] - before["fallback"]  # leftovers the compiled merge left to NumPy (last run)
        prefix_rows = counts["prefix_fallback"] - before["prefix_fallback"]  # prefix rows judged again by NumPy
        nonlocal worst
        worst = max(worst, (best, release.t))
        info = pub.info
        print(f"{release.t:>10}{len(release):>9}{best:>8.3f}{pub.n_groups:>8}{info['merged']:>8}{len(pub.suppressed):>12}{fallbacks:>11}{prefix_rows:>13}", flush=True)
        out.extend([("bkseq_view", "wall_s", release.t, best), ("bkseq_view", "records", release.t, len(release)),
                    ("bkseq_view", "groups", release.t, pub.n_groups), ("bkseq_view", "merged", release.t, info["merged"]),
                    ("bkseq_view", "suppressed", release.t, len(pub.suppressed)),
                    ("bkseq_view", "merge_fallbacks", release.t, fallbacks),
                    ("bkseq_view", "prefix_fallbacks", release.t, prefix_rows)])
        return pub

    comp.anonymizer.publish = timed
    runner.run_releases(cfg, comp, progress=False)
    print(f"largest: {worst[0]:.3f} s (view {worst[1]}; target <= 0.2 s)")
    out += [("bkseq_view_max", "wall_s", worst[1], worst[0])]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--million", action="store_true", help="one publish of 10^6 records instead")
    ap.add_argument("--bkseq-views", action="store_true", help="every view of the real bkseq data set instead (best of 3 each)")
    ap.add_argument("--out", type=Path, help="also write the measurements to this results CSV")
    args, _ = ap.parse_known_args()  # `python -m benchmarks js_reduce` passes its filter through
    rng = np.random.default_rng(2012)
    if args.million:
        rows = bench_million(rng)
    elif args.bkseq_views:
        rows = bench_bkseq_views()
    else:
        rows = bench_posterior(rng)
        rows += bench_publish(rng)
    if args.out:
        write_results(args.out, rows)


if __name__ == "__main__":
    main()
