"""Background knowledge on the sensitive attribute given the QI (BK_sv): the uniform prior, an
adversary with no background knowledge (every sensitive value equally likely for every respondent)."""

from __future__ import annotations

import numpy as np

from cdpbench.data import Release
from cdpbench.plugin import Knowledge


class Uniform(Knowledge):
    """Uniform prior over the sensitive domain (an adversary with no background knowledge)."""

    def prior(self, release: Release) -> np.ndarray:
        m = release.n_values
        return np.full((len(release), m), 1.0 / m)
