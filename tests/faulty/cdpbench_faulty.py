"""A third-party data set plugin that fails on purpose: the fault tests' job that goes wrong.

Installed for a test the way any plugin is found, by its entry point: the test puts this folder
(module + ``cdpbench_faulty-0.1.0.dist-info``) on ``PYTHONPATH``. Each release is a small random
table; with ``tag == fail_tag`` the data set breaks at release ``fail_at`` in the way ``how`` says:
``error`` raises an exception a plugin bug would raise, ``exit`` kills the worker process.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cdpbench.plugin import Dataset
from cdpbench.schema import NumericQI, Schema, Sensitive, CategoricalQI
from cdpbench.taxonomy import Taxonomy


@dataclass
class FaultyParams:
    releases: int = 3
    records: int = 60
    tag: int = field(default=0, metadata={"help": "a label to sweep over"})
    fail_tag: int = field(default=-1, metadata={"help": "the job whose tag equals this fails"})
    fail_at: int = 2
    how: str = "error"
    sleep: float = field(default=0.0, metadata={"help": "seconds to wait before each release (a slow job)"})


class Faulty(Dataset):
    """Small random releases; breaks at release fail_at when tag == fail_tag."""

    Params = FaultyParams

    def releases(self, rng: np.random.Generator):
        p = self.params
        schema = Schema((NumericQI("age", 0, 100), CategoricalQI("sex", Taxonomy.flat(["F", "M"]))),
                        Sensitive("disease", ("flu", "cold", "hiv")))
        for t in range(1, p.releases + 1):
            time.sleep(p.sleep)
            if p.tag == p.fail_tag and t == p.fail_at:
                if p.how == "exit":
                    os._exit(3)
                raise RuntimeError(f"faulty data set broke at release {t} on purpose")
            frame = pd.DataFrame({"id": np.arange(p.records), "age": rng.integers(0, 101, p.records),
                                  "sex": rng.choice(["F", "M"], p.records),
                                  "disease": rng.choice(["flu", "cold", "hiv"], p.records)})
            yield schema.encode(frame, t)
