"""JS-reduce issue, acceptance 5: one 5,000-tuple bkseq view (defender revision + anonymization +
attacker) <= 0.5 s, and a whole 24-release Fig. 4 run of one configuration <= 15 s.

Runs the release loop in-process on the ``js_reduce/fig4`` preset for each method (one job each,
MLflow not involved), with the DK 3-step attacker only (``extra_attackers`` off) and then with
all four attackers of the figure, and prints per-stage times per view and the whole-run time.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir

from cdpbench import runner
from cdpbench.registry import register_configs

CONF = Path(__file__).resolve().parents[1] / "conf"
VIEW_STAGES = ["time_prior", "time_publish", "time_verify", "time_revise", "time_attack"]


def run(method: str, *overrides: str):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["+experiment=js_reduce/fig4", f"+experiment/js_reduce/method={method}", *overrides])
    t0 = time.perf_counter()
    table = runner.run_releases(cfg, runner.build(cfg), progress=False)
    return table, time.perf_counter() - t0


def main() -> None:
    print("bkseq, 24 releases x 5,000 tuples; per-view time = defender prior/revision + publish + verify + attack")
    print(f"{'method':<12} {'attackers':<10} {'view median [s]':>16} {'view max [s]':>13} {'run [s]':>8} {'publish med':>12} {'dk3 gain@24':>12}")
    for method in ("js_reduce", "l_diversity", "t_closeness", "bt_privacy"):
        for label, extra in (("dk3 only", ["extra_attackers=null"]), ("all four", [])):
            table, total = run(method, *extra)
            view = table[[c for c in VIEW_STAGES if c in table]].sum(axis=1)
            print(
                f"{method:<12} {label:<10} {np.median(view):>16.3f} {view.max():>13.3f} {total:>8.1f} "
                f"{table['time_publish'].median():>12.3f} {table['dk3.gain_rho'].iloc[-1]:>12.3f}"
            )
    print("targets: one view <= 0.5 s; one whole 24-release configuration <= 15 s")


if __name__ == "__main__":
    main()
