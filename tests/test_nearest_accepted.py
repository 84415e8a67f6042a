"""cdpbench.plugin.nearest_accepted: judging groups nearest first, in growing blocks, finds the
group that judging all of them and taking the nearest accepted one finds (JS-reduce's merge of
large releases, BKAA's leftovers)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.plugin import GroupExtension, nearest_accepted


class Table(GroupExtension):
    """A fixed acceptance table ``ok[row, group]`` that records which groups were asked."""

    def __init__(self, ok):
        self.ok, self.asked = ok, []

    def accepts_plus(self, row):
        return self.ok[row]

    def accepts_plus_among(self, row, groups):
        self.asked.append(np.asarray(groups).copy())
        return self.ok[row, groups]


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 300),
    st.sampled_from([0.0, 0.01, 0.2, 0.9]),
    st.sampled_from([3, 20, 1000]),
    st.sampled_from([1, 8, 512]),
    st.booleans(),
    st.booleans(),
)
def test_blocks_find_the_nearest_accepted_group(seed, G, p, spread, block, later, floats):
    """On random distances full of ties (integers or floats): the accepted group at the least
    distance, ties to the lower (or later) index; -1 when none accepts. Every group is judged at
    most once, every block comes after the groups of the blocks before it, and the search stops
    at the first block holding an accepted group."""
    rng = np.random.default_rng(seed)
    distance = rng.integers(0, spread, G)
    if floats:
        distance = distance / 7.0
    ok = rng.random((1, G)) < p
    ext = Table(ok)
    stats = {"accepts_calls": 0}
    got = nearest_accepted(ext, 0, distance, block=block, later_on_ties=later, stats=stats)
    asked = np.concatenate(ext.asked) if ext.asked else np.zeros(0, dtype=int)
    accepted = np.flatnonzero(ok[0])
    if len(accepted) == 0:
        assert got == -1
        assert sorted(asked.tolist()) == list(range(G))  # every group asked
    else:
        near = accepted[distance[accepted] == distance[accepted].min()]
        assert got == (near.max() if later else near.min())
        assert got in ext.asked[-1]
        assert not any(ok[0, b].any() for b in ext.asked[:-1])
    assert len(asked) == len(set(asked.tolist())), "a group judged twice"
    for before, after in zip(ext.asked, ext.asked[1:]):
        assert distance[before].max() < distance[after].min()  # blocks in distance order, ties kept together
    assert stats["accepts_calls"] == len(ext.asked)
