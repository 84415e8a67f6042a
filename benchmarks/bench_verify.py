"""Verification speed: t-closeness (equal distance) and basic β-likeness of one publication.

UCI Adult (the 30,162 rows without '?'), QI age, education-num, hours-per-week (numeric), sex,
race (categorical, ARX hierarchies), sensitive occupation; the publication is Mondrian's with
k-anonymity k = 10. cdpbench's verifiers (``levels``: the achieved t and β over all groups, one
vectorized pass) against pycanon 1.3.6's ``t_closeness`` / ``basic_beta_likeness`` fed exactly the
same groups (the group id as its only quasi-identifier). The values must be identical (to 1e-12);
the table shows the best time of a few repeats and the speed-up (target: >= 20x).

    python benchmarks/bench_verify.py
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pandas as pd
from pycanon import anonymity

from cdpbench.data import History, Publication, Release
from cdpbench.datasets import adult
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry

K = 10
REPEATS_OURS = 20
REPEATS_PYCANON = 3
TARGET_SPEEDUP = 20.0


def adult_release() -> Release:
    release = adult.adult_release(("age", "education-num", "hours-per-week", "sex", "race"), "occupation")
    assert len(release) == 30_162, len(release)
    return release


def k_anonymous_publication(release: Release, ctx: ModelContext) -> Publication:
    reg = default_registry()
    k_anonymity = reg.create("privacy_model", "k_anonymity", {"k": K})
    mondrian = reg.create("anonymizer", "mondrian", {})
    pub = mondrian.publish(release, PublishContext(k_anonymity, ctx, History(), np.random.default_rng(0)))
    assert k_anonymity.verify(pub, ctx).satisfied
    assert len(pub.suppressed) == 0  # pycanon's reference distribution is that of the published rows
    return pub


def best_time(fn: Callable[[], float], repeats: int) -> tuple[float, float]:
    """(best wall time in seconds over ``repeats`` calls, the value of the last call)."""
    best, value = np.inf, float("nan")
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main() -> None:
    reg = default_registry()
    release = adult_release()
    ctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
    pub = k_anonymous_publication(release, ctx)
    frame = pd.DataFrame(
        {"group": pub.group, "occupation": np.asarray(release.schema.sensitive.values, dtype=object)[pub.sensitive]}
    )
    t_model = reg.create("privacy_model", "t_closeness", {"distance": "equal"})
    beta_model = reg.create("privacy_model", "beta_likeness", {"variant": "basic"})
    cases = [
        (
            "t-closeness (equal)",
            lambda: t_model.levels(pub, ctx)["t"],
            lambda: float(anonymity.t_closeness(frame, ["group"], ["occupation"])),
        ),
        (
            "basic beta-likeness",
            lambda: beta_model.levels(pub, ctx)["beta"],
            lambda: float(anonymity.basic_beta_likeness(frame, ["group"], ["occupation"])),
        ),
    ]
    print(f"Adult: {len(release)} records, {pub.n_groups} groups (Mondrian, k={K}), {release.n_values} sensitive values")
    header = f"{'verifier':<22} {'value':>12} {'cdpbench ms':>12} {'pycanon ms':>12} {'speed-up':>9}"
    print(header)
    print("-" * len(header))
    ratios = []
    for name, ours_fn, theirs_fn in cases:
        t_ours, v_ours = best_time(ours_fn, REPEATS_OURS)
        t_theirs, v_theirs = best_time(theirs_fn, REPEATS_PYCANON)
        assert abs(v_ours - v_theirs) <= 1e-12, (name, v_ours, v_theirs)
        ratio = t_theirs / t_ours
        ratios.append(ratio)
        print(f"{name:<22} {v_ours:>12.6f} {1e3 * t_ours:>12.2f} {1e3 * t_theirs:>12.1f} {ratio:>8.0f}x")
    verdict = "met" if min(ratios) >= TARGET_SPEEDUP else "NOT met"
    print(f"values identical (|diff| <= 1e-12); target speed-up >= {TARGET_SPEEDUP:.0f}x: {verdict}")


if __name__ == "__main__":
    main()
