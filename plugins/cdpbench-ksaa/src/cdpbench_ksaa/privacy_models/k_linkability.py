"""``k_linkability``: every respondent of the latest release linkable to at least ``k`` distinct
sensitive values through the natural join of all releases so far (after Shmueli et al., "Limiting
disclosure of sensitive data in sequential releases of databases", Inf. Sci. 2012; the lab's
statement of it, see the package README). The model, its readings and parameters:
:mod:`~cdpbench_ksaa.linkability_models`."""

from __future__ import annotations

from typing import ClassVar

from ..linkability_models import LinkabilityModel


class KLinkability(LinkabilityModel):
    """k-linkability (Shmueli et al. 2012): every respondent linkable to >= k distinct values through the natural join of the releases."""

    pruned: ClassVar[bool] = False
