"""KSAA issue, acceptance 4: one release of 30,162 Adult records through ``ksaa`` with the linkage
check against the previous release. Target: <= 5 s here.

adult_sequential with every cleaned Adult row (30,162), two releases (QI sets sex, race, education
then sex, race, marital-status; 10% of occupations re-drawn before the second), k-diversity over
the full matching join (k = 2, 4), ``ksaa`` with its defaults (``js_reduce`` primary groups, leftovers
merged). Release 1 is published first (not timed); release 2's ``publish`` is timed (median of 3; once at 30,162):
primary groups, the join with release 1 (linkage graph, maximum flow, strongly connected
components), merges. Also timed alone: the linkage graph of the two publications and its pruning.

    python benchmarks/bench_ksaa.py [records ...]     # default: 5000 30162
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from cdpbench.data import History
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench_ksaa.linkage_graph import linkage_graph, prune
from cdpbench_ksaa.sequential import AdultSequential, AdultSequentialParams


def main() -> None:
    for records in [int(a) for a in sys.argv[1:]] or [5000, 30_162]:
        bench(records)


def bench(records: int) -> None:
    reg = default_registry()
    r1, r2 = AdultSequential(AdultSequentialParams(records=records, releases=2)).releases(np.random.default_rng(0))
    for k in (2, 4):
        model = reg.create("privacy_model", "k_diversity", {"k": k})
        anon = reg.create("anonymizer", "ksaa", {})
        h = History()
        p1 = anon.publish(r1, PublishContext(model, ModelContext(r1.schema, r1.sensitive_distribution(), h, r1), h, np.random.default_rng(0)))
        h = History([r1], [p1])
        mctx = ModelContext(r2.schema, r2.sensitive_distribution(), h, r2)
        times = []
        for _ in range(3 if records <= 5000 else 1):
            t0 = time.perf_counter()
            p2 = anon.publish(r2, PublishContext(model, mctx, h, np.random.default_rng(0)))
            times.append(time.perf_counter() - t0)
        rep = model.verify(p2, mctx)
        t0 = time.perf_counter()
        g = prune(linkage_graph(p1.public(), p2.public()))
        t_graph = time.perf_counter() - t0
        print(f"k={k}: ksaa publish of release 2 ({len(r2):,} records, linkage check with release 1): "
              f"{statistics.median(times):.2f} s (target <= 5 s); {p2.n_groups} groups, "
              f"{p2.info['merge_rounds']:.0f} merge rounds ({p2.info['judged']:.0f} publications judged), violations {rep.violations}; linkage graph + pruning alone "
              f"{t_graph:.2f} s ({len(g.edge_a):,} edges, {int(g.kept.sum()):,} on some maximum matching)")


if __name__ == "__main__":
    main()
