"""m-invariance (Xiao & Tao, SIGMOD 2007; Def. 8 of Khan et al.) as the ``m_invariance`` anonymizer.

Reading: a tuple's *lifespan* is a run of consecutive releases in which its respondent is present
with the same sensitive value. Within a lifespan the signature never changes (division: the
survivors of each signature form one bucket; balancing tops every value up with new tuples, then
**counterfeits**); a respondent whose value was updated, or who returns after a deletion, starts a
new lifespan and is assigned like a new tuple, with no regard to its earlier signatures — which is
what lets the collusion attack (Def. 1) intersect its lifespans. New tuples are made m-eligible
with the fewest counterfeits and assigned by the α/β rule; buckets are split to one tuple per
value and generalized. See :mod:`cdpbench_invariance.family` for the shared phases.
"""

from __future__ import annotations

from ..family import InvariantAnonymizer
from ..phases import Policy


class MInvariance(InvariantAnonymizer):
    """m-invariance (Xiao & Tao 2007): constant signatures within a lifespan, counterfeits to balance."""

    policy = Policy(scope="lifespan", filler="counterfeit")
