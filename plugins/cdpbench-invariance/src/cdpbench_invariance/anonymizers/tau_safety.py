"""τ-safety (Anjum et al.; [11] of Khan et al., not in papers/) as the ``tau_safety`` anonymizer,
in the reading Khan et al. describe (§3.1, §4, spec §3.5 item 14).

Reading: classification, balancing with **counterfeits**, assignment and generalization as in
m-invariance, plus a Del table; only the previous release is checked. A respondent published at
r-1 keeps its signature when its value lies in it (unchanged or updated to a value of the
signature); an updated respondent whose new value is not in it gets a new signature disjoint from
that one signature only; a re-inserted respondent reuses its Del signature when its value lies in
it, else gets one disjoint from it. Signatures older than that are not looked at, so a respondent
updated twice can return to a signature that intersects an earlier one: the collusion attack of
§1.1 (p3: {SSM-pos, Asthma}, {Glaucoma, Diarrhea}, {SSM-pos, Dyspepsia}).
"""

from __future__ import annotations

from ..family import InvariantAnonymizer
from ..phases import Policy


class TauSafety(InvariantAnonymizer):
    """τ-safety: signatures checked against the previous release (and Del) only, counterfeits to balance."""

    policy = Policy(scope="previous", filler="counterfeit")
