"""The core's data sets (entry-point group ``cdpbench.datasets``) and release validation.

* ``adult`` — :class:`~cdpbench.datasets.adult.AdultContinuous`, BayFrame §6.1's continuous scenario;
* ``churn`` — :class:`~cdpbench.datasets.churn.Churn`, the (tau, m)-slicedBucket insert / delete /
  update / re-insert process (reusable over any base table: :func:`~cdpbench.datasets.churn.churn_process`);
* ``csv`` — :class:`~cdpbench.datasets.csvfiles.CsvReleases`, one CSV/Parquet file per release;
* :func:`~cdpbench.datasets.validate.validated` — cross-release checks the runner applies to any data set.
* :mod:`~cdpbench.datasets.zipcodes` — the synthetic ``zip`` QI Adult QI lists may name (not UCI data:
  seeded 5-digit codes 47001-47958, generalized by longest common prefix).

Vendored data and its licenses: ``data/LICENSE-NOTICE.md``.
"""
