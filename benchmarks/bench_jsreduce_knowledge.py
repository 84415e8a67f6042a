"""Speed and memory of sequential knowledge (JS-reduce §5.3 revision) and the sequential attacker.

A BKseq-sized stream without the data set: 19 sensitive values, a random order-3 model
(Dirichlet transition rows), 16,160 individuals, 24 releases of 5,000 tuples each (each release a
random subset, so individuals reappear ~7 times), publications of random groups of 3. Per release
it times (median and max over the 24 releases):

* the defender cycle of the runner: ``knowledge.prior`` (DK, 3 steps) -> configuration posterior ->
  ``knowledge.revise``;
* the same cycle with SPM (corpus of 24 x 5,000 mined once, timed separately) and IE;
* ``SequentialAttacker.observe`` (DK 3-step, configuration estimator);

and the peak of traced memory during one 3-step ``prior`` over 5,000 respondents.

    python benchmarks/bench_jsreduce_knowledge.py
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pandas as pd

from cdpbench.data import Publication
from cdpbench.plugin import AttackContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive

M = 19
INDIVIDUALS = 16_160
TUPLES = 5_000
RELEASES = 24
GROUP = 3
SCHEMA = Schema((NumericQI("age", 45, 74),), Sensitive("exres", tuple(f"v{i}" for i in range(M))))


class RandomOrder3Model:
    values = SCHEMA.sensitive.values
    max_order = 3

    def __init__(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.tables = {j: rng.dirichlet(np.full(M, 0.3), size=(M,) * j) for j in (1, 2, 3)}
        self.sv = rng.dirichlet(np.ones(M), size=30)

    def bk_sv(self, qi):
        return self.sv[qi[:, 0].astype(np.int64) - 45]

    def bk_seq(self, steps):
        return self.tables[steps]

    def corpus(self, views, tuples, seed):
        rng = np.random.default_rng(seed)
        out = np.full((INDIVIDUALS, views), -1, dtype=np.int64)
        for v in range(views):  # the benchmark's corpus: random values, random presence
            out[rng.choice(INDIVIDUALS, tuples, replace=False), v] = rng.integers(0, M, tuples)
        return out


def stream(model):
    rng = np.random.default_rng(1)
    ages = rng.integers(45, 75, INDIVIDUALS)
    for t in range(1, RELEASES + 1):
        ids = np.sort(rng.choice(INDIVIDUALS, TUPLES, replace=False))
        frame = pd.DataFrame({"id": ids, "age": ages[ids], "exres": np.array(SCHEMA.sensitive.values)[rng.integers(0, M, TUPLES)]})
        rel = SCHEMA.encode(frame, t, truth={"model": model})
        groups = np.empty(TUPLES, dtype=np.int64)
        groups[rng.permutation(TUPLES)] = np.arange(TUPLES) // GROUP
        yield rel, Publication.from_partition(rel, groups)


def main() -> None:
    reg = default_registry()
    model = RandomOrder3Model()
    estimator = reg.create("estimator", "configuration")
    defenders = {name: reg.create("knowledge", name, {"steps": 3}) for name in ("dk", "spm", "ie")}
    attacker = reg.create("attacker", "sequential", {"knowledge": "dk", "steps": 3})
    times: dict[str, list[float]] = {f"defender {n}": [] for n in defenders} | {"attacker dk": []}
    spm_mining = 0.0
    views = []
    rng = np.random.default_rng(2)
    pairs = list(stream(model))
    for rel, pub in pairs:
        for name, knowledge in defenders.items():
            t0 = time.perf_counter()
            prior = knowledge.prior(rel)
            if name == "spm" and rel.t == 2:  # the corpus is mined at the first revision
                spm_mining = time.perf_counter() - t0
            post = estimator.posterior(prior[pub.row], pub.sensitive, pub.group, pub.n_groups, M)
            knowledge.revise(pub.public(), post, pub.respondent)
            if not (name == "spm" and rel.t == 2):
                times[f"defender {name}"].append(time.perf_counter() - t0)
        views.append(pub.public())
        t0 = time.perf_counter()
        attacker.observe(views[-1], AttackContext(rel, views, rng))
        times["attacker dk"].append(time.perf_counter() - t0)

    knowledge = defenders["dk"]
    rel = pairs[-1][0]
    knowledge.prior(rel)  # warm
    tracemalloc.start()
    knowledge.prior(rel)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    seen = knowledge.posteriors.stored(knowledge.posteriors.lookup(rel.respondent))

    print(f"{RELEASES} releases x {TUPLES} tuples, {M} values, 3-step knowledge, groups of {GROUP}")
    print(f"{'per release':<22}{'median ms':>12}{'max ms':>10}")
    for label, values in times.items():
        print(f"{label:<22}{1000 * np.median(values):>12.1f}{1000 * np.max(values):>10.1f}")
    print(f"SPM corpus mining (24 x {TUPLES}, once): {1000 * spm_mining:.0f} ms (incl. one revision)")
    print(
        f"peak traced memory of one DK 3-step prior over {len(rel)} respondents "
        f"({int((seen >= 3).sum())} with 3 stored posteriors): {peak / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    main()
