"""BCF issue, acceptance 4: the BCF-anonymizer on allD2, the three attacks, a 10-release sequence.

(a) ``bcf`` (k = 40, Sen1) publishing R2 = D1 ∪ allD2 (45,222 records) against R1 = tds(k = 40)
    of D1 (15,060). Target: <= 2 s (paper: under 7 s including I/O). Median of 5.
(b) F, C and B on that pair (R1, BCF R2) and on (R1, k-anonymized R2), from the public views
    (``Classes.from_view`` + ``attack_pair``). Target: <= 0.5 s. Median of 5.
(c) A 10-release cumulative sequence (D1 then 9 increments of 3,016 training records, Sen1),
    published by ``bcf`` (k = 40), then verified whole-history by ``bcf_anonymity`` release by
    release (micro attacks with every earlier release and the §7.1 compositions). Target: verified
    in <= 10 s.
(d) The whole process of one 2-release run of the Fig. 2 preset (bcf, Sen1, allD2, k = 40,
    tracking off), for scale.

    python benchmarks/bench_bcf.py [--out experiments/results/bench_bcf.csv]

``--out FILE``: also write what is measured as a tidy results CSV (``run,metric,step,value``, step
0; runs ``bcf``, ``attack_<pair>``, ``sequence``, ``process_fig2``; times ``wall_s``), which
``cdpbench tables`` renders into ``experiments/README.md``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cdpbench.data import History
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.tables import write_results
from cdpbench_bcf.anonymizers.bcf import BCFAnonymizer
from cdpbench_bcf.params import BCFParams
from cdpbench_bcf.classes import Classes
from cdpbench_bcf.correspondence import attack_pair
from cdpbench_bcf.cumulative import CumulativeParams
from cdpbench_bcf.datasets.adult_cumulative import AdultCumulative
from cdpbench_bcf.anonymizers.tds import TopDownSpecialization
from cdpbench_bcf.privacy_models.bcf_anonymity import BCFAnonymity

K = 40


def context(model, release, history):
    mctx = ModelContext(release.schema, release.sensitive_distribution(), history, release)
    return PublishContext(model, mctx, history, np.random.default_rng(0)), mctx


def median_time(fn, repeat=5):
    times = []
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="also write the measurements to this results CSV")
    args, _ = ap.parse_known_args()  # `python -m benchmarks bcf` passes its filter through
    rows: list[tuple] = []
    kanon = default_registry().create("privacy_model", "k_anonymity", {"k": K})
    r1_raw, r2_raw = AdultCumulative(CumulativeParams(attributes="sen1", d2=30_162)).releases(None)
    r1 = TopDownSpecialization().publish(r1_raw, context(kanon, r1_raw, History())[0])
    hist = History([r1_raw], [r1])

    def bcf():
        return BCFAnonymizer(BCFParams(k=K)).publish(r2_raw, context(kanon, r2_raw, hist)[0])

    bcf()  # warm (scipy.sparse import)
    t, r2 = median_time(bcf)
    print(f"(a) bcf Sen1 allD2 ({len(r2_raw):,} records) k={K}: {t:.3f} s (target <= 2 s); "
          f"{r2.n_groups} classes, {r2.info['specializations']} specializations, {r2.info['validity_checks']} checks")
    rows += [("bcf", "wall_s", 0, t), ("bcf", "records", 0, len(r2_raw)), ("bcf", "classes", 0, r2.n_groups),
             ("bcf", "specializations", 0, r2.info["specializations"]), ("bcf", "checks", 0, r2.info["validity_checks"])]
    kr2 = TopDownSpecialization().publish(r2_raw, context(kanon, r2_raw, History())[0])
    reg = default_registry()
    pairs = [("R1", r1, "BCF R2", r2, "bcf"), ("R1", r1, "k-anonymized R2", kr2, "tds")]
    for k in (40, 5):  # Mondrian's local boxes: many more classes, and not a cut
        model = reg.create("privacy_model", "k_anonymity", {"k": k})
        mondrian = reg.create("anonymizer", "mondrian", {})
        m1 = mondrian.publish(r1_raw, context(model, r1_raw, History())[0])
        m2 = mondrian.publish(r2_raw, context(model, r2_raw, History())[0])
        pairs.append((f"Mondrian k={k} R1", m1, f"Mondrian k={k} R2", m2, f"mondrian_k{k}"))
    for n1, p1, n2, p2, slug in pairs:
        v1, v2 = p1.public(), p2.public()
        t, att = median_time(lambda: attack_pair(Classes.from_view(v1), Classes.from_view(v2)))
        print(f"(b) F, C, B on ({n1}, {n2}; {p1.n_groups} x {p2.n_groups} classes): {t * 1000:.1f} ms "
              f"(target <= 500 ms); FA {att.FA:.0f}, CA {att.CA:.0f}, BA {att.BA:.0f}")
        run = f"attack_{slug}"
        rows += [(run, "wall_s", 0, t), (run, "classes_1", 0, p1.n_groups), (run, "classes_2", 0, p2.n_groups),
                 (run, "FA", 0, att.FA), (run, "CA", 0, att.CA), (run, "BA", 0, att.BA)]

    raws = list(AdultCumulative(CumulativeParams(attributes="sen1", d2=3016, releases=10)).releases(None))
    anon = BCFAnonymizer(BCFParams(k=K))
    history = History()
    t0 = time.perf_counter()
    for raw in raws:
        pub = anon.publish(raw, context(kanon, raw, history)[0])
        history.releases.append(raw)
        history.publications.append(pub)
    t_pub = time.perf_counter() - t0
    model = BCFAnonymity(BCFParams(k=K))
    t0 = time.perf_counter()
    reports = []
    for n, (raw, pub) in enumerate(zip(history.releases, history.publications)):
        mctx = ModelContext(raw.schema, raw.sensitive_distribution(), History(history.releases[:n], history.publications[:n]), raw)
        reports.append(model.verify(pub, mctx))
    t_ver = time.perf_counter() - t0
    print(f"(c) 10 cumulative releases ({len(raws[0]):,} -> {len(raws[-1]):,} records): verified in {t_ver:.2f} s "
          f"(target <= 10 s); published by bcf in {t_pub:.2f} s; violations {[r.violations for r in reports]}; "
          f"FA {[r.levels.get('FA') for r in reports[1:]]}, BA {[r.levels.get('BA') for r in reports[1:]]}")
    rows += [("sequence", "verify_s", 0, t_ver), ("sequence", "publish_s", 0, t_pub), ("sequence", "releases", 0, len(raws)),
             ("sequence", "records_first", 0, len(raws[0])), ("sequence", "records_last", 0, len(raws[-1])),
             ("sequence", "violations", 0, sum(r.violations for r in reports))]

    exe = Path(sys.executable).parent / "cdpbench"
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run([str(exe), "+experiment=bcf/fig2", "+experiment/bcf/method=bcf_r2", "dataset.d2=30162",
                        "privacy_model.k=40", "tracking.enabled=false", "progress=false"], cwd=tmp, check=True, capture_output=True)
        t_proc = time.perf_counter() - t0
        print(f"(d) whole process, one Fig. 2 run (bcf, Sen1, allD2, k=40, 2 releases): {t_proc:.1f} s")
    rows.append(("process_fig2", "wall_s", 0, t_proc))
    if args.out:
        write_results(args.out, rows)


if __name__ == "__main__":
    main()
