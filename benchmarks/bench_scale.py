"""Scale (issue #28): every anonymizer, every privacy model's verifier, every attacker and every
metric at 10^4, 10^5 and 10^6 records a release: time, peak memory and the fitted exponent.

Each *case* is one cdpbench run, written as the command-line overrides a user would type
(``python benchmarks/bench_scale.py --show`` prints them), over two releases of one scenario at
``n`` records a release:

* ``churn``: the core's churn scenario over a synthetic Adult-like base (``dataset.base=synthetic``:
  Adult rows drawn with replacement; QI age, sex, zip; sensitive occupation), ``initial = n`` and
  the churn defaults' proportions a release (8.75 % deletions, 10 % insertions, 2.5 % updates,
  2.5 % re-insertions), so release 2 holds 1.0125 n records;
* ``bkseq``: JS-reduce's medical views with ``tuples = n``;
* ``sequential`` / ``cumulative``: KSAA's and BCF's Adult scenarios over the synthetic base; the
  sequential cases run the scenario's three releases (its three QI sets: release 3 is joined with
  both earlier ones) and report release 3;
* ``churn_tds_fnlwgt``: top-down specialization on one fine numeric QI, its many-steps regime.

A case runs in a child process of its own (``--child CASE N``): the config is composed and checked
as the CLI does (:func:`cdpbench.launch.prepare`), the components built by the registry, and the
release loop (:func:`cdpbench.runner.run_releases`) runs with MLflow off; every component's call
is timed on its own (the anonymizer's ``publish``, the privacy model's ``verify``, each attacker's
``observe``, each metric's ``compute``, the defender knowledge's ``prior``) and printed as it
returns, so a case stopped at its time limit still reports the components that finished. The
times reported are those of **release 2** (release 3 for the sequential cases) (a release with a history: the re-publication methods
and the attacks over releases do their real work there). Peak memory is the child process's
``ru_maxrss`` (from ``os.wait4``): everything the case holds at once (its two releases, their
publications, every attacker's state), so it is an upper bound for each component of the case.

A size a case cannot finish within its limit (``--limit``, 600 s by default) is reported as stopped
(``status`` 1: time limit, 2: out of memory, 3: an error), and larger sizes are not tried (status
4). Each case runs ``--repeat`` times (3 by default) at each size and each component's fastest time
is reported, as ``timeit`` does: on a quiet machine the slowest of three runs was up to 1.9 times
the fastest (``wall_s_slowest`` in the results), enough to move an exponent by 0.25. The
exponent is the slope of log(time) over log(n) from 10^5 to 10^6 (and, as ``exponent_all``, the
least-squares slope over every size that finished). ``numpy/linear_pass`` (:func:`linear_pass`)
times a plain linear NumPy pass at each size: the growth a linear method shows on this machine.

    python benchmarks/bench_scale.py                       # every case, 10^4, 10^5, 10^6
    python benchmarks/bench_scale.py --sizes 10000 100000  # smaller
    python benchmarks/bench_scale.py --cases churn_mondrian_k bkseq_js_reduce
    python benchmarks/bench_scale.py --run24               # the 24-release run at 10^6 (whole process)
    python benchmarks/bench_scale.py --out experiments/results/bench_scale.csv   # (and `cdpbench tables`)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
SIZES = (10_000, 100_000, 1_000_000)
RELEASES = 2
LIMIT_S = 600.0
REPEAT = 3  # runs of a case at a size; each component's fastest is kept (module docstring)
CHILD_FLAG = "--child"
# status codes written to the results file (metric ``status``)
OK, TIME_LIMIT, OUT_OF_MEMORY, ERROR, NOT_TRIED = 0, 1, 2, 3, 4
METRICS = ("belief", "kl_divergence", "publication_info", "query_error", "record_linkage", "utility")
NO_METRICS = [f"metrics.{m}.enabled=false" for m in METRICS]


# ---------------------------------------------------------------------------------- scenarios
def churn(n: int, releases: int = RELEASES, qi: str = "[age,sex,zip]") -> list[str]:
    """The churn scenario over a synthetic Adult base, ``n`` records in release 1."""
    return [
        "dataset=churn",
        "dataset.base=synthetic",
        f"dataset.releases={releases}",
        f"dataset.qi={qi}",
        f"dataset.initial={n}",
        f"dataset.deletions={n * 875 // 10_000}",
        f"dataset.insertions={n // 10}",
        f"dataset.updates={n // 40}",
        f"dataset.reinsertions={n // 40}",
        "metrics.utility.ncp_range=domain",
    ]


def churn_fnlwgt(n: int, releases: int = RELEASES) -> list[str]:
    """The churn scenario with one fine numeric QI, fnlwgt (about 21,000 distinct values in Adult): top-down
    specialization then takes thousands of steps (its many-steps regime)."""
    return churn(n, releases, qi="[fnlwgt]")


def bkseq(n: int, releases: int = RELEASES) -> list[str]:
    """JS-reduce's BKseq views, ``n`` expected tuples a view."""
    return ["dataset=bkseq", f"dataset.releases={releases}", f"dataset.tuples={n}"]


def sequential(n: int, releases: int = RELEASES) -> list[str]:
    """KSAA's Adult sequential scenario over the synthetic base, ``n`` respondents (its QI sets: sex, race, education /
    sex, race, marital-status / sex, education, workclass, one a release)."""
    return ["dataset=adult_sequential", "dataset.base=synthetic", f"dataset.records={n}", f"dataset.releases={releases}"]


def cumulative(n: int, releases: int = RELEASES) -> list[str]:
    """BCF's Adult cumulative scenario over the synthetic base: R1 of ``n`` records, R2 = R1 + n/10."""
    return ["+experiment/bcf/setting=adult", "dataset.base=synthetic", f"dataset.r1={n}", f"dataset.d2={n // 10}",
            f"dataset.releases={releases}"]


@dataclass(frozen=True)
class Case:
    """One run: a scenario at ``n`` records, the overrides of its defense and attackers, and the
    components whose times it reports (``kind/name`` keys; each component is reported by one case)."""

    name: str
    scenario: Callable[..., list[str]]
    overrides: tuple[str, ...]
    reports: tuple[str, ...]
    releases: int = RELEASES  # the times are those of the last release
    rename: dict[str, str] = field(default_factory=dict)  # a component's key -> the key it is reported under

    def argv(self, n: int) -> list[str]:
        return [*self.scenario(n, self.releases), *self.overrides, "tracking.enabled=false", "progress=false"]


def _extra(label: str, spec: str) -> str:
    return f"+extra_attackers.{label}={spec}"


CASES: tuple[Case, ...] = (
    # -- churn: the single-release classics, their verifiers, the collusion and membership attacks, every metric
    Case("churn_mondrian_k", churn,
         ("anonymizer=mondrian", "privacy_model=k_anonymity", "privacy_model.k=4", "attacker=intersection",
          _extra("membership", "{name:membership}"), _extra("snapshot", "{name:snapshot}")),
         ("anonymizer/mondrian", "verifier/k_anonymity", "attacker/intersection", "attacker/membership",
          "attacker/snapshot", *(f"metric/{m}" for m in METRICS))),
    Case("churn_partitioned_mondrian_k", churn,
         ("anonymizer=partitioned_mondrian", "anonymizer.partitions=4", "privacy_model=k_anonymity", "privacy_model.k=4",
          "attacker=none", *NO_METRICS),
         ("anonymizer/partitioned_mondrian",)),
    Case("churn_mondrian_l", churn,
         ("anonymizer=mondrian", "privacy_model=l_diversity", "privacy_model.l=4", "attacker=none", *NO_METRICS),
         ("verifier/l_diversity",)),
    Case("churn_mondrian_t", churn,
         ("anonymizer=mondrian", "privacy_model=t_closeness", "privacy_model.t=0.2", "attacker=none", *NO_METRICS),
         ("verifier/t_closeness",)),
    Case("churn_mondrian_beta", churn,
         ("anonymizer=mondrian", "privacy_model=beta_likeness", "privacy_model.beta=1.0", "attacker=none", *NO_METRICS),
         ("verifier/beta_likeness",)),
    Case("churn_mondrian_bt", churn,
         ("anonymizer=mondrian", "privacy_model=bt_privacy", "privacy_model.B=0.5", "privacy_model.t=0.8",
          "attacker=none", *NO_METRICS),
         ("verifier/bt_privacy",)),
    # the peers' single-release models (issue #29); delta_presence and k_map against the churn base table, the
    # release's public population (initial + insertions rows: 1.1 n at two releases)
    Case("churn_mondrian_delta_disclosure", churn,
         ("anonymizer=mondrian", "privacy_model=delta_disclosure", "privacy_model.delta=2.0", "privacy_model.k=4",
          "attacker=none", *NO_METRICS),
         ("verifier/delta_disclosure",)),
    Case("churn_mondrian_alpha_k", churn,
         ("anonymizer=mondrian", "privacy_model=alpha_k_anonymity", "privacy_model.alpha=0.5", "privacy_model.k=4",
          "attacker=none", *NO_METRICS),
         ("verifier/alpha_k_anonymity",)),
    Case("churn_mondrian_delta_presence", churn,
         ("anonymizer=mondrian", "privacy_model=delta_presence", "privacy_model.delta_max=0.95", "attacker=none",
          *NO_METRICS),
         ("verifier/delta_presence",)),
    Case("churn_mondrian_k_map", churn,
         ("anonymizer=mondrian", "privacy_model=k_map", "privacy_model.k=4", "attacker=none", *NO_METRICS),
         ("verifier/k_map",)),
    # the snapshot adversary's other estimators (Mondrian + distinct 4-diversity)
    Case("churn_snapshot_configuration", churn,
         ("anonymizer=mondrian", "privacy_model=l_diversity", "privacy_model.l=4", "attacker=none",
          _extra("snapshot_configuration", "{name:snapshot,estimator:configuration}"), *NO_METRICS),
         ("attacker/snapshot_configuration",)),
    Case("churn_snapshot_permanent", churn,
         ("anonymizer=mondrian", "privacy_model=l_diversity", "privacy_model.l=4", "attacker=none",
          _extra("snapshot_permanent", "{name:snapshot,estimator:permanent}"), *NO_METRICS),
         ("attacker/snapshot_permanent",)),
    # -- churn: the re-publication family (Khan et al.), m = 4
    Case("churn_m_invariance", churn, ("+experiment/quickstart/defense=m_invariance", "attacker=none", *NO_METRICS),
         ("anonymizer/m_invariance", "verifier/m_invariance")),
    Case("churn_tau_safety", churn, ("+experiment/quickstart/defense=tau_safety", "attacker=none", *NO_METRICS),
         ("anonymizer/tau_safety", "verifier/tau_safety")),
    Case("churn_tau_safe_lk", churn, ("+experiment/matrix/churn_defense=tau_safe_lk", "attacker=none", *NO_METRICS),
         ("anonymizer/tau_safe_lk", "verifier/tau_safe_lk")),
    Case("churn_sliced_bucket", churn, ("+experiment/quickstart/defense=sliced_bucket", "attacker=none", *NO_METRICS),
         ("anonymizer/sliced_bucket", "verifier/sliced_bucket")),
    # -- bkseq: JS-reduce (DK 3-step defender) and BKAA (BayFrame 1-step), their attackers
    Case("bkseq_js_reduce", bkseq,
         ("+experiment/matrix/defense=js_reduce", "attacker=sequential", "attacker/estimator=omega", *NO_METRICS),
         ("anonymizer/js_reduce", "verifier/js_reduce", "knowledge/dk", "attacker/sequential")),
    Case("bkseq_bkaa", bkseq,
         ("anonymizer=bkaa", "knowledge=bayframe", "knowledge.steps=1", "estimator=bayesian", "privacy_model=j_similarity",
          "attacker=bayframe", *NO_METRICS),
         ("anonymizer/bkaa", "verifier/j_similarity", "knowledge/bayframe", "attacker/bayframe")),
    # -- bkseq: DP continual release (issue #29) on the data-independent grid, the noisy-counts adversary; the
    # metrics that read records (kl_divergence, record_linkage) cannot run on a counts publication
    Case("bkseq_dp_tree", bkseq,
         ("anonymizer=dp_tree", "privacy_model=dp_budget", "attacker=noisy_counts", *NO_METRICS),
         ("anonymizer/dp_tree", "verifier/dp_budget", "attacker/noisy_counts")),
    Case("bkseq_dp_release", bkseq,
         ("anonymizer=dp_release", "privacy_model=dp_budget", "attacker=none", *NO_METRICS),
         ("anonymizer/dp_release",)),
    # the sequential adversary's exact posteriors, one a case (each holds its beliefs over every respondent)
    Case("bkseq_sequential_configuration", bkseq,
         ("anonymizer=mondrian", "privacy_model=l_diversity", "privacy_model.l=2", "attacker=none",
          _extra("sequential_configuration", "{name:sequential,knowledge:dk,steps:3,estimator:configuration}"),
          *NO_METRICS),
         ("attacker/sequential_configuration",)),
    Case("bkseq_sequential_permanent", bkseq,
         ("anonymizer=mondrian", "privacy_model=l_diversity", "privacy_model.l=2", "attacker=none",
          _extra("sequential_permanent", "{name:sequential,knowledge:dk,steps:3,estimator:permanent}"), *NO_METRICS),
         ("attacker/sequential_permanent",)),
    # -- sequential releases (KSAA): k-diversity k = 4, the linkage adversary
    # the merge to its end: at 10^6 the default max_rounds (1,000) stops it with a group still rejected
    Case("sequential_ksaa", sequential,
         ("+experiment/ksaa/anonymizer=ksaa", "anonymizer.max_rounds=1000000", "privacy_model=k_diversity",
          "privacy_model.k=4", "attacker=none", *NO_METRICS),
         ("anonymizer/ksaa",), releases=3),
    Case("sequential_cell", sequential,
         ("+experiment/ksaa/anonymizer=cell", "privacy_model=k_diversity", "privacy_model.k=4", "attacker=linkage",
          _extra("natural", "{name:linkage,pruned:false}"), *NO_METRICS),
         ("anonymizer/cell", "verifier/k_diversity", "attacker/linkage", "attacker/natural"), releases=3),
    Case("sequential_tds4asr", sequential,
         ("+experiment/ksaa/anonymizer=tds4asr", "privacy_model=k_linkability", "privacy_model.k=4", "attacker=none",
          *NO_METRICS),
         ("anonymizer/tds4asr", "verifier/k_linkability"), releases=3),
    Case("sequential_j_similarity_join", sequential,
         ("+experiment/ksaa/anonymizer=tds4asr", "privacy_model=j_similarity_join", "privacy_model.inner.k=4",
          "knowledge=uniform", "attacker=none", *NO_METRICS),
         ("verifier/j_similarity_join",), releases=3),
    # -- cumulative releases (BCF): k = 80, the correspondence attacks
    Case("cumulative_bcf", cumulative,
         ("+experiment/bcf/method=bcf_r2", "privacy_model.k=80", "attacker=correspondence",
          _extra("forward", "{name:forward,k:80}"),
          _extra("cross", "{name:cross,k:80}"), _extra("backward", "{name:backward,k:80}")),
         ("anonymizer/bcf", "verifier/bcf_anonymity", "attacker/correspondence", "attacker/forward", "attacker/cross",
          "attacker/backward")),
    Case("cumulative_tds", cumulative, ("+experiment/bcf/method=k_anonymized_r2", "privacy_model.k=80", "attacker=none"),
         ("anonymizer/tds",)),
    Case("churn_tds_fnlwgt", churn_fnlwgt,
         ("anonymizer=tds", "privacy_model=k_anonymity", "privacy_model.k=80", "attacker=none", *NO_METRICS),
         ("anonymizer/tds@fnlwgt",), rename={"anonymizer/tds": "anonymizer/tds@fnlwgt"}),
)
MONDRIAN_CLASS = ("anonymizer/mondrian", "anonymizer/partitioned_mondrian")


# ---------------------------------------------------------------------------------- the child
def child(case_name: str, n: int) -> int:
    """Run one case at ``n`` records a release; print one JSON line per timed call."""
    from cdpbench import launch, runner
    from cdpbench.presets import conf_dir

    case = next(c for c in CASES if c.name == case_name)

    def emit(**kw) -> None:
        if "key" in kw:
            kw["key"] = case.rename.get(kw["key"], kw["key"])
        print(json.dumps(kw), flush=True)

    hydra = launch.hydra_instance(conf_dir())
    plan = launch.prepare(hydra, case.argv(n), multirun=False)
    cfg = plan.jobs[0].cfg
    comp = runner.build(cfg)

    def timed(key: str, fn: Callable) -> Callable:
        def call(*args, **kwargs):
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            emit(key=key, release=_release[0], wall_s=time.perf_counter() - t0)
            return out

        return call

    _release = [0]
    names = comp.names
    publish = comp.anonymizer.publish

    def publish_counted(release, ctx):
        _release[0] = release.t
        emit(key="records", release=release.t, value=len(release))
        publication = publish(release, ctx)
        for name, value in publication.info.items():  # the anonymizer's own counts (rounds, steps, ...)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                emit(key=f"info.{name}", release=release.t, value=value)
        return publication

    comp.anonymizer.publish = timed(f"anonymizer/{names['anonymizer']}", publish_counted)
    comp.privacy_model.verify = timed(f"verifier/{names['privacy_model']}", comp.privacy_model.verify)
    if comp.knowledge is not None:
        comp.knowledge.prior = _prior_timed(comp.knowledge.prior, f"knowledge/{names['knowledge']}", emit, _release)
    for label, attacker in comp.attackers.items():
        attacker.observe = timed(f"attacker/{label}", attacker.observe)
    for name, metric in comp.metrics.items():
        metric.compute = timed(f"metric/{name}", metric.compute)
    runner.run_releases(cfg, comp, progress=False)
    emit(key="peak_mb", release=case.releases, value=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return 0


def _prior_timed(prior: Callable, key: str, emit, release_box: list) -> Callable:
    """The defender's ``prior(release)`` is asked before ``publish``: time it with the release's t."""

    def call(release):
        t0 = time.perf_counter()
        out = prior(release)
        emit(key=key, release=release.t, wall_s=time.perf_counter() - t0)
        return out

    return call


# ---------------------------------------------------------------------------------- the parent
@dataclass
class Outcome:
    times: dict[str, float]  # key -> wall_s at the last release
    info: dict[str, float]  # the anonymizer's Publication.info numbers at the last release
    records: int | None
    peak_mb: float
    wall_s: float
    status: int
    reason: str


def run_case(case: Case, n: int, limit: float) -> Outcome:
    """One child process: its timed calls, its peak memory and how it ended."""
    cmd = [sys.executable, str(Path(__file__).resolve()), CHILD_FLAG, case.name, str(n)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True)
    timer = _Killer(proc, limit)
    out, err = proc.communicate()
    timer.cancel()
    wall = time.perf_counter() - t0
    times: dict[str, float] = {}
    info: dict[str, float] = {}
    records = None
    for line in out.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("release") != case.releases:
            continue
        if rec["key"] == "records":
            records = int(rec["value"])
        elif rec["key"].startswith("info."):
            info[rec["key"]] = rec["value"]
        elif rec["key"] == "peak_mb":
            timer.peak_mb = max(timer.peak_mb, rec["value"])
        else:
            times[rec["key"]] = rec["wall_s"]
    peak = timer.peak_mb
    if timer.fired:
        return Outcome(times, info, records, peak, wall, TIME_LIMIT, f"time limit {limit:.0f} s")
    if proc.returncode != 0:
        tail = (err.strip().splitlines() or ["?"])[-1]
        code = OUT_OF_MEMORY if ("MemoryError" in err or proc.returncode == -signal.SIGKILL) else ERROR
        return Outcome(times, info, records, peak, wall, code, tail[:200])
    return Outcome(times, info, records, peak, wall, OK, "")


class _Killer:
    """Ends a child's process group at its time limit; keeps the child's peak RSS (``/proc``)."""

    def __init__(self, proc: subprocess.Popen, limit: float):
        import threading

        self.proc, self.fired, self.peak_mb = proc, False, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(limit,), daemon=True)
        self._thread.start()

    def _watch(self, limit: float) -> None:
        t_end = time.monotonic() + limit
        while not self._stop.wait(0.2):
            self.peak_mb = max(self.peak_mb, _hwm_mb(self.proc.pid))
            if time.monotonic() > t_end and self.proc.poll() is None:
                self.fired = True
                os.killpg(self.proc.pid, signal.SIGKILL)
                return

    def cancel(self) -> None:
        self._stop.set()
        self._thread.join()


def _hwm_mb(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), in MB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def slope(ns: list[int], ts: list[float]) -> float:
    """Least-squares slope of log t over log n (nan with fewer than two points)."""
    pts = [(math.log(n), math.log(t)) for n, t in zip(ns, ts) if t > 0 and math.isfinite(t)]
    if len(pts) < 2:
        return float("nan")
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def fastest(outcomes: list[Outcome]) -> Outcome:
    """One outcome for repeated runs of a case at one size: each component's fastest time (timeit's
    rule: the other runs' extra time is the machine's, not the method's), the highest peak memory,
    and the first failure if a run failed (its times: those of the runs that finished before)."""
    failed = next((o for o in outcomes if o.status != OK), None)
    done = [o for o in outcomes if o.status == OK] or outcomes
    times: dict[str, float] = {}
    for o in done:
        for key, t in o.times.items():
            times[key] = min(t, times.get(key, t))
    first = failed or done[0]
    return Outcome(times, done[0].info, done[0].records, max(o.peak_mb for o in outcomes),
                   min(o.wall_s for o in done), first.status, first.reason)


def measure(cases: list[Case], sizes: list[int], limit: float, repeat: int = 1) -> list[tuple[str, str, int, float]]:
    """Every case at every size, ``repeat`` runs each (:func:`fastest`; a failed run is not repeated),
    stopping a case at its first failed size; the results rows."""
    rows: list[tuple[str, str, int, float]] = []
    for case in cases:
        stopped = None
        per_key: dict[str, dict[int, float]] = {k: {} for k in case.reports}
        for n in sizes:
            if stopped is not None:
                for key in case.reports:
                    rows += [(key, "status", n, NOT_TRIED), (key, "wall_s", n, float("nan"))]
                continue
            runs: list[Outcome] = []
            while len(runs) < repeat and (not runs or runs[-1].status == OK):
                runs.append(run_case(case, n, limit))
            o = fastest(runs)
            print(f"{case.name:34s} n={n:>9,}  {o.wall_s:7.1f} s  peak {o.peak_mb:7.0f} MB  "
                  f"{'ok' if o.status == OK else o.reason}  (fastest of {len(runs)})", flush=True)
            for key in case.reports:
                t = o.times.get(key, float("nan"))
                done = key in o.times
                status = OK if done else (o.status if o.status != OK else ERROR)
                slowest = max((r.times[key] for r in runs if key in r.times), default=float("nan"))
                rows += [(key, "wall_s", n, t), (key, "status", n, status), (key, "peak_mb", n, o.peak_mb),
                         (key, "runs", n, len(runs)), (key, "wall_s_slowest", n, slowest)]
                if o.records is not None:
                    rows.append((key, "records", n, o.records))
                if key.startswith("anonymizer/"):
                    rows += [(key, name, n, value) for name, value in sorted(o.info.items())]
                if done:
                    per_key[key][n] = t
                print(f"    {key:40s} {t:10.3f} s" if done else f"    {key:40s} not finished", flush=True)
            if o.status != OK:
                stopped = n
        for key in case.reports:
            got = per_key[key]
            top = [n for n in sizes if n in got]
            ex = slope(top[-2:], [got[n] for n in top[-2:]]) if len(top) >= 2 and top[-1] == max(sizes) else float("nan")
            rows += [(key, "exponent", 0, ex), (key, "exponent_all", 0, slope(top, [got[n] for n in top]))]
            rows.append((key, "case", 0, CASES.index(case)))
    return rows


FLOOR_FLAG = "--floor-child"
FLOOR_KEY = "numpy/linear_pass"


def linear_pass(n: int, repeat: int = 5) -> float:
    """The fastest of ``repeat`` timings of a plain linear NumPy pass over ``n`` records (a range,
    a gather by a permutation, a masked write, a copy, a bincount: the steps the components chain
    on their per-record arrays), fresh arrays each time as the components allocate them. Its growth
    from 10^5 to 10^6 is this machine's, not a method's: the working set leaves the cache (10^5
    int64 values: 0.8 MB; 10^6: 8 MB) and every fresh array above malloc's mmap threshold is new
    pages, faulted in."""
    import numpy as np

    index = np.random.default_rng(0).permutation(n)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        a = np.arange(n)
        b = a[index]
        b[b % 2 == 0] = 0
        c = b.copy()
        np.bincount(c % 1024, minlength=1024)
        best = min(best, time.perf_counter() - t0)
    return best


def floor_rows(sizes: list[int]) -> list[tuple[str, str, int, float]]:
    """:func:`linear_pass` at each size, each in a process of its own (as the cases run), and its
    exponent: the growth a linear method shows here at best."""
    got = {}
    for n in sizes:
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), FLOOR_FLAG, str(n)], capture_output=True,
                             text=True, check=True, cwd=ROOT)
        got[n] = float(out.stdout.strip().splitlines()[-1])
        print(f"{FLOOR_KEY:34s} n={n:>9,}  {got[n] * 1e3:8.3f} ms", flush=True)
    rows = [(FLOOR_KEY, "wall_s", n, t) for n, t in got.items()]
    top = sorted(got)
    rows.append((FLOOR_KEY, "exponent", 0, slope(top[-2:], [got[n] for n in top[-2:]])))
    return rows


def run24(n: int, limit: float) -> list[tuple[str, str, int, float]]:
    """The issue's 24-release run at ``n`` records a release, as a whole process: Mondrian +
    distinct 4-diversity under the snapshot and intersection attackers, every metric, MLflow off.
    The churn keeps the releases at about ``n`` records: as many deletions (12.5 %) as insertions
    (10 %) and re-insertions (2.5 %), so release 2 holds 0.975 n records and so does every later one."""
    argv = [a for a in churn(n, 24) if not a.startswith("dataset.deletions=")] + [f"dataset.deletions={n // 8}"]
    argv += ["anonymizer=mondrian", "privacy_model=l_diversity", "privacy_model.l=4", "attacker=intersection",
             _extra("snapshot", "{name:snapshot}"), "tracking.enabled=false", "progress=false"]
    cmd = [str(Path(sys.executable).with_name("cdpbench")), *argv]
    print("$", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd="/tmp", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    timer = _Killer(proc, limit)
    _, err = proc.communicate()
    timer.cancel()
    wall = time.perf_counter() - t0
    status = TIME_LIMIT if timer.fired else (OK if proc.returncode == 0 else ERROR)
    print(f"24 releases of {n:,}: {wall:.1f} s, peak {timer.peak_mb:.0f} MB, status {status} {err[-300:] if status else ''}")
    return [("run24", "wall_s", n, wall), ("run24", "peak_mb", n, timer.peak_mb), ("run24", "status", n, status)]


def main(argv: list[str]) -> int:
    if argv[:1] == [CHILD_FLAG]:
        return child(argv[1], int(argv[2]))
    if argv[:1] == [FLOOR_FLAG]:
        print(linear_pass(int(argv[1])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--cases", nargs="+", help="only these cases (names from --show)")
    ap.add_argument("--limit", type=float, default=LIMIT_S, help="seconds a case may take at one size")
    ap.add_argument("--repeat", type=int, default=REPEAT,
                    help=f"runs of each case at each size; each component's fastest is reported (default {REPEAT})")
    ap.add_argument("--run24", action="store_true", help="also the 24-release run at the largest size")
    ap.add_argument("--only-run24", action="store_true", help="only the 24-release run")
    ap.add_argument("--show", action="store_true", help="print every case's command line and exit")
    ap.add_argument("--out", help="write a tidy results CSV (run,metric,step,value)")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if not args.cases or c.name in args.cases]
    if args.cases and len(cases) != len(args.cases):
        known = ", ".join(c.name for c in CASES)
        ap.error(f"--cases: unknown case(s) {sorted(set(args.cases) - {c.name for c in cases})}; known: {known}")
    if args.show:
        for c in cases:
            print(f"{c.name}: cdpbench {' '.join(c.argv(max(args.sizes)))}")
        return 0
    if args.repeat < 1:
        ap.error(f"--repeat: an integer >= 1; got {args.repeat}")
    rows = [] if args.only_run24 else measure(cases, sorted(args.sizes), args.limit, args.repeat)
    if not args.only_run24:
        rows += floor_rows(sorted(args.sizes))
    if args.run24 or args.only_run24:
        rows += run24(max(args.sizes), max(args.limit, 1200.0))
    if args.out:
        from cdpbench.tables import write_results

        write_results(Path(args.out), rows)
    return 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main(sys.argv[1:]))
