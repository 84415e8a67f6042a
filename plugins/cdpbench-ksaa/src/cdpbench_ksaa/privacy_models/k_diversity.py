"""``k_diversity``: every respondent of the latest release linkable to at least ``k`` distinct
sensitive values through the full matching join of all releases so far — only the links on some
maximum matching of the linkage graph, so it is the stricter of the two linkability models (after
Shmueli & Tassa, "Privacy by diversity in sequential releases of databases", Inf. Sci. 2015; the
lab's statement of it, see the package README). The model, its readings and parameters:
:mod:`~cdpbench_ksaa.linkability_models`."""

from __future__ import annotations

from typing import ClassVar

from ..linkability_models import LinkabilityModel


class KDiversity(LinkabilityModel):
    """k-diversity (Shmueli & Tassa 2015): every respondent linkable to >= k distinct values through the full matching join."""

    pruned: ClassVar[bool] = True
