"""The cdpbench command runs with one BLAS thread per process unless the user chose a count."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cdpbench.cli import BLAS_THREAD_VARS

PROBE = """
import json, os
import cdpbench.cli  # what the cdpbench command imports first
import numpy
out = {v: os.environ.get(v) for v in %r}
try:
    from threadpoolctl import threadpool_info
    out["blas"] = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
except ImportError:
    out["blas"] = None
print(json.dumps(out))
""" % (BLAS_THREAD_VARS,)


def probe(**env):
    clean = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
    done = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_one_thread_by_default_and_the_loaded_blas_uses_it():
    out = probe()
    assert all(out[v] == "1" for v in BLAS_THREAD_VARS)
    if out["blas"] is None:
        pytest.skip("threadpoolctl is not installed: the loaded BLAS cannot be asked")
    assert out["blas"] and set(out["blas"]) == {1}


def test_a_count_the_user_set_is_left_alone():
    out = probe(OMP_NUM_THREADS="2")
    assert out["OMP_NUM_THREADS"] == "2"
    assert all(out[v] is None for v in BLAS_THREAD_VARS if v != "OMP_NUM_THREADS")
