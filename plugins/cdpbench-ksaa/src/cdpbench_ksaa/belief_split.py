"""``ksaa``'s repair ``repair=split`` (the lab's reading; KSAA §1 gives no more than "merge with
the QI-closest group"): a group KSAA's own model (``j_similarity_join``) still rejects after
merge-until-valid is split by its respondents' *joined beliefs* (the defender's beliefs restricted
to the values the join leaves each respondent, :meth:`JSimilarityJoin.joined_batch`).

Why: J-similarity (BayFrame Def. 7 (b)) asks the beliefs inside a group to be similar, and
merging is not monotone for it — a large group mixes respondents whose earlier groups leave them
different candidate values, so their restricted beliefs diverge (adult_sequential, uniform
knowledge, J = 0.6: merge-until-valid ends with one group of every record, still rejected).

The split of one group: its records with equal joined beliefs form one *part*; then, while some
part is rejected by the inner model (``privacy_model.inner``: k-anonymity, JS divergence <= J,
β-likeness, on the joined beliefs) and more than one is left, the rejected part with the fewest
records (ties: the one whose first record comes first) is merged with the part whose union with it
has the smallest JS divergence of the beliefs (Eq. 6 on the union's running sums; ties: the part
whose first record comes first). The parts are the new groups (local generalization: each one's
box is the smallest around its records). Splitting changes the join (a respondent's candidate
values are those of its new group linked to its earlier ones), so the publication is judged
again and the groups still rejected are split again, up to ``repair_rounds`` rounds; a round that
changes nothing ends the repair.
"""

from __future__ import annotations

import numpy as np

from cdpbench.beliefs import entropy, normalized_beliefs
from cdpbench.data import GroupBatch


def split_group(beliefs: np.ndarray, sensitive: np.ndarray, n_values: int, accepts, base: float = 2.0) -> np.ndarray:
    """Part (0..P-1, numbered by first record) of each of a group's records (module docstring).
    ``beliefs`` ``[n, m]`` the records' joined beliefs, ``sensitive`` their values,
    ``accepts(GroupBatch) -> bool [P]`` the inner model's verdict on candidate parts."""
    n = len(sensitive)
    rho = normalized_beliefs(np.asarray(beliefs, dtype=float))
    _, first, part = np.unique(rho, axis=0, return_index=True, return_inverse=True)
    part = np.asarray(part, np.int64).ravel()
    order = np.argsort(first, kind="stable")  # parts numbered by first record
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    part = rank[part]
    P = len(order)
    if P <= 1:
        return np.zeros(n, np.int64)
    m = rho.shape[1]
    size = np.bincount(part, minlength=P).astype(float)
    mass = np.zeros((P, m))
    np.add.at(mass, part, rho)
    ent = np.bincount(part, weights=entropy(rho, base), minlength=P)
    first_row = np.full(P, n, np.int64)
    np.minimum.at(first_row, part, np.arange(n))
    ok = np.asarray(accepts(GroupBatch(np.asarray(sensitive, np.int64), part, P, n_values, beliefs)), dtype=bool)
    alive = np.ones(P, dtype=bool)
    into = np.arange(P)  # union-find by relabelling: the part each original part is now in
    while True:
        rejected = np.flatnonzero(alive & ~ok)
        if len(rejected) == 0 or alive.sum() <= 1:
            break
        x = rejected[np.lexsort((first_row[rejected], size[rejected]))[0]]
        others = np.flatnonzero(alive)
        others = others[others != x]
        n_u = size[x] + size[others]
        jsd = entropy((mass[x] + mass[others]) / n_u[:, None], base) - (ent[x] + ent[others]) / n_u
        y = others[np.lexsort((first_row[others], np.round(jsd, 12)))[0]]
        keep, gone = (x, y) if first_row[x] < first_row[y] else (y, x)
        size[keep] += size[gone]
        mass[keep] += mass[gone]
        ent[keep] += ent[gone]
        first_row[keep] = min(first_row[keep], first_row[gone])
        alive[gone] = False
        into[into == gone] = keep
        rows = np.flatnonzero(into[part] == keep)
        ok[keep] = bool(np.asarray(accepts(GroupBatch(np.asarray(sensitive, np.int64)[rows], np.zeros(len(rows), np.int64), 1,
                                                      n_values, np.asarray(beliefs)[rows])))[0])
    final = into[part]
    _, out = np.unique(first_row[final], return_inverse=True)
    return np.asarray(out, np.int64).ravel()
