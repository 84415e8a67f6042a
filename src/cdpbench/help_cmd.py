"""``cdpbench --help`` / ``-h`` / ``help``: cdpbench's own commands (Hydra's page: ``--hydra-help``)."""

from __future__ import annotations

HELP = """\
cdpbench: run privacy defenses against attacks on continuously published data, tracked in MLflow.

usage:
  cdpbench [OVERRIDES...]       one run: conf/config.yaml's defaults changed by OVERRIDES
  cdpbench -m [OVERRIDES...]    a sweep, one run per combination of comma-separated values;
                                hydra/launcher=joblib hydra.launcher.n_jobs=N runs N in parallel;
                                hydra/launcher=ray (a Ray cluster), submitit_slurm (SLURM)
  cdpbench plugins [KIND]       installed plugins, the override selecting each, every parameter
  cdpbench experiments          the presets (+experiment=NAME): what each does, its command
  cdpbench report [--latest | --parent RUN_ID] [--metric KEY] [--against PARAM] ...
                                a metric of every run of a sweep: a PNG, a summary CSV (report -h)
  cdpbench tables [--check]     README tables from committed results (report --export F.csv)
  cdpbench -m ... --rerun       run every job again (a sweep skips the jobs FINISHED with the same
                                config, code and inputs; --reuse-old-code: whatever the code)
  cdpbench reproduce RUN_ID     run a job (or a sweep's jobs) again, compare every stored metric
  cdpbench server [--port P]    an MLflow server for a team (127.0.0.1 by default; --dry-run);
                                jobs log to it with MLFLOW_TRACKING_URI=http://127.0.0.1:P
  cdpbench help                 this page (also -h, --help)

examples:
  cdpbench anonymizer=mondrian privacy_model=l_diversity privacy_model.l=3 dataset.releases=12
  cdpbench -m privacy_model=k_anonymity,l_diversity privacy_model.k=2,5,10
  cdpbench -m +experiment=quickstart hydra/launcher=joblib hydra.launcher.n_jobs=2
  cdpbench metrics.kl_divergence.enabled=false metrics.query_error.selectivity=0.05 seed=1
  cdpbench report --latest --metric gain_rho

results: one MLflow run per job (a sweep: a parent run with one child per job) in
  $MLFLOW_TRACKING_URI, else sqlite:///$PWD/outputs/mlflow.db (browse it with
  mlflow ui --backend-store-uri sqlite:///$PWD/outputs/mlflow.db); each job's run.json,
  config.yaml and metrics.csv (metrics.png with tracking.plot=true) also in outputs/runs/ (a
  sweep: outputs/multirun/); reports in outputs/reports/.
  tracking.enabled=false keeps MLflow out of the run; cdpbench record FOLDER writes it later.

Hydra: cdpbench --hydra-help lists Hydra's own flags; cdpbench --cfg job [OVERRIDES...] prints
  the composed config without running anything."""


def help_text() -> str:
    return HELP


def help_command(argv: list[str] | None = None) -> int:
    print(HELP)
    return 0
