"""BayFrame's Bayesian estimator of posterior beliefs PB^sv (Amiri et al., TDP 2019, §4.3.1).

Inside a QI-group Q with |Q| = n tuples and n respondents V_Q, a *permutation* pm_l is a one-to-one
assignment of the tuples to the respondents (the paper's bijection S_Q → V_Q; the n! permutations
are counted with duplicates when values repeat). Its confidence degree is
cd_l = Σ_{v ∈ V_Q} RPD^sv(v, s(pm_l^{-1}(v))). The adversary's 3-step procedure (§4.3.1):

1. the observation is the permutation of maximum confidence degree, u = argmax_l cd_l, and
   X ~ Multinomial(1, θ_0..θ_q) takes the value x = e_u (q + 1 = n! outcomes);
2. Def. 1 / Eq. 1 with a Dirichlet(a_0..a_q) prior: E(θ_l) = (a_l + x_l) / (Σ_k a_k + 1);
3. Eq. 2: PB(v, s) = Σ_{l: pm_l gives v a tuple of value s} E(θ_l).

Posterior-based cascading (§4.4.2, Def. 6, Example 4) sets a_l = a + Σ CR(v, s) over the
"matchings" (v, s) — compromised-record entries (Def. 4) with CR(v, s) > RPD(v, s) — for which pm_l
gives v a tuple of value s. A certain entry, CR(v, s) = 1 (§4.4), removes v and one tuple of value
s from Q; the rest is estimated as a group of its own and v's posterior is one-hot on s.

Closed form (DESIGN.md §5, specs/bayframe.md §1.8). Counting permutations instead of enumerating
the n! of them, with n_s the number of tuples of value s and M the matchings:

    P(i→j) ∝ a(n−1)! + [u(i)=j] + Σ_{(v,s,CR)∈M} CR·((n−1)!·[s(j)=s] if v = i
                                                     else (n−2)!·(n_s − [s(j)=s])),
    normalizer a·n! + 1 + Σ_{(v,s,CR)∈M} CR·n_s·(n−1)!.

Divided by (n−1)! (so 1/(n−1)! is the only factorial left; it underflows harmlessly to 0 for large
groups) and summed over the tuples of each value t (m_t of them), with C[i, s] the total matched
confidence of respondent i on value s and K[s] = Σ_{v ∈ V_Q} C[v, s]:

    p(i, t) = ( m_t·(a + C[i,t] + (X_i − K[t] + C[i,t]) / (n−1)) + [s(u(i)) = t] / (n−1)! )
              / ( a·n + 1/(n−1)! + Σ_s K[s]·m_s ),        X_i = Σ_s (K[s] − C[i,s])·m_s.

It needs, per respondent, only the *value* of the tuple u assigns it; O(n·m) per group after the
matching, every group of a publication in one pass of segment sums. u itself is a maximum-weight
perfect matching (Hungarian algorithm, scipy's ``linear_sum_assignment``), one call per group —
only where it can change a bit of the result: 1/(n−1)! < a·2^-54 is below half an ulp of every
term it is added to (n >= 20 for a = 1), so larger groups need no matching.

**The paper's procedure for large groups** (``exact_up_to``). "Computing the exact posterior
belief is intractable [13]. There are |Q|! possible permutations in every QI-group [...] we compute
posterior beliefs by the Ω-estimate method proposed by Li et al. [13] when a QI-group is large"
(§4.3.1); no size is given. The only number the text ties to it is §5.3's cost "O(min(|Q|!,
|Q|)), since the cost of the Bayesian-based estimator is O(|Q|!) while the Ω-estimator takes
O(|Q|)": read literally, the cheaper of the two per group, i.e. exact while |Q|! <= |Q| (|Q| <= 2)
and the Ω-estimate from |Q| = 3 (``exact_up_to: 2``; the presets still run the exact form). With ``exact_up_to =
T`` a group of more than T tuples (after §4.4's certain entries left it) gets the posterior of the
``large_groups`` estimator reference (default classic's ``omega``) from the same prior rows the
exact form uses (restricted to the group's values when ``normalize``); its posterior-based entries
(Def. 6) are not used there (the Ω-estimate has no Dirichlet parameters), and no u is computed for
it. ``exact_up_to: null`` (the default) is the lab's exact closed form for every size.

Readings chosen where the paper is silent or inconsistent (specs/bayframe.md §1.2, §1.7):

* **Ties in u.** When *every* permutation has the same cd (e.g. Table 8: the respondents of a
  t1 group share one PD_sv row) the observation carries no information: x = 0, so
  E(θ_l) = a_l / Σ_k a_l (Def. 1 with zero trials). Without compromised records this is the uniform
  posterior over tuples, 1/n each — exactly Table 8. (With matchings the Dirichlet parameters still
  carry the CR knowledge; the brief asked for "uniform", which is the same thing when M is empty.)
  All permutations of a complete bipartite graph tie iff w[i,j] − w[i,0] − w[0,j] + w[0,0] = 0 for
  all i, j (relative tolerance 1e-9). Other ties (Example 2: pm0 and pm1) are broken by relabelling
  rows and columns at random with the run's generator before the Hungarian call: a maximal
  matching chosen at random, *not* uniformly among all maximal ones.
* **Normalization (Table 9, default on).** Before computing u and the tests CR > RPD, each
  respondent's prior row is restricted to the values present in its group and renormalized; a row
  with no mass on them is uniform over them. Off, the raw weights are used as given.
* **Def. 6 with Example 4's rule.** An entry with CR = RPD is dropped. If some entry of v on a
  value of S_Q has CR < RPD, *all* of v's given entries are dropped and the remainder
  1 − Σ(given CR of v on values of S_Q) is spread over the values of S_Q without an entry,
  proportionally to RPD over them (renormalized; uniformly if they have no RPD mass). Then only
  entries with CR > RPD count. Entries on values absent from Q never matter (n_s = 0).
* **u under cascading** is the RPD-based u of Example 2 (spec §1.7 item 4).
* n = 1: the respondent owns the single tuple (one-hot); ``weights=None`` is a uniform prior, so
  every permutation ties and the posterior is the group's frequencies m_s/n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from cdpbench.errors import DataError, require
from cdpbench.plugin import Estimator, plugin_ref

_TIE_RTOL = 1e-9  # relative tolerance of "every permutation ties"
_EQUAL = 1e-12  # absolute slack of CR = RPD (Def. 6) and of CR = 1 (certain)


class CompromisedRecords(NamedTuple):
    """Compromised-record knowledge CR(v, s, t_i) (Def. 4) for one publication: entry ``k`` says the
    adversary links the respondent of input row ``row[k]`` to sensitive value ``value[k]`` with
    confidence ``confidence[k]`` in [0, 1]. At most one entry per (row, value); the confidences of one
    row sum to at most 1. A plain 3-tuple of arrays in this order is accepted as well."""

    row: np.ndarray
    value: np.ndarray
    confidence: np.ndarray


# ---------------------------------------------------------------------------- step 1: u
def _max_weight_matching(w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """u[i] = tuple of respondent i in a maximum-weight perfect matching of ``w`` (n x n), after a
    random relabelling of rows and columns (a maximal matching chosen at random, not uniformly)."""
    from scipy.optimize import linear_sum_assignment  # here, not at import: plugin discovery stays fast

    n = w.shape[0]
    row_label, column_label = rng.permutation(n), rng.permutation(n)
    rows, columns = linear_sum_assignment(w[row_label[:, None], column_label], maximize=True)
    u = np.empty(n, dtype=np.int64)
    u[row_label[rows]] = column_label[columns]
    return u


def observed_assignment(w: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
    """The observed permutation u of §4.3.1 step 1 for one group, or ``None`` when every permutation
    has the same confidence degree (then x = 0; see the module docstring).

    ``w[i, j]`` is the weight RPD(i, s(j)) of respondent i for tuple j (n x n). Returns ``u`` with
    ``u[i]`` = the tuple of respondent i in a maximum-weight perfect matching, i.e. a permutation of
    maximum cd = Σ_i w[i, u(i)]; ties are broken by a random relabelling with ``rng`` (a maximal
    matching chosen at random, not uniformly among all maximal ones). A 1 x 1 ``w`` has a single
    permutation, hence ``None``.
    """
    w = np.asarray(w, dtype=float)
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise DataError(f"w must be a square (respondents x tuples) matrix; got shape {w.shape}")
    if w.size == 0:
        return None
    deviation = w - w[:, :1] - w[:1, :] + w[0, 0]  # 0 everywhere iff all permutations tie
    if np.abs(deviation).max() <= _TIE_RTOL * np.abs(w).max():
        return None
    return _max_weight_matching(w, rng)


# ---------------------------------------------------------------------------- RPD over the group
def group_restricted_prior(weights: np.ndarray, present: np.ndarray) -> np.ndarray:
    """``[N, m]`` prior rows restricted to the values present in each respondent's group and
    renormalized (Table 9, Example 3); ``present[i, s]`` says whether value s is published in the
    group of row i. A row without mass on its group's values is uniform over them.

    Each row is its own: the rows are computed a block at a time (:func:`_row_blocks`), the same
    floats as the whole-array form without its five ``[N, m]`` temporaries."""
    weights = np.asarray(weights, dtype=float)
    present = np.asarray(present, dtype=bool)
    out = np.empty(weights.shape)
    for rows in _row_blocks(len(weights)):
        here = present[rows]
        restricted = np.where(here, weights[rows], 0.0)
        total = restricted.sum(axis=1, keepdims=True)
        uniform = here / np.maximum(here.sum(axis=1, keepdims=True), 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[rows] = np.where(total > 0, restricted / total, uniform)
    return out


_BLOCK = 1 << 14  # rows per block of the row-wise passes: their [block, m] temporaries stay in cache


def _row_blocks(n: int):
    """Slices of :data:`_BLOCK` rows covering ``range(n)``: a row-wise pass over ``[N, m]`` arrays a
    block at a time gives the same floats as the whole-array pass; at 10^6 rows the whole-array
    temporaries (about 100 MB each) made it grow faster than N."""
    for start in range(0, n, _BLOCK):
        yield slice(start, min(start + _BLOCK, n))


# ---------------------------------------------------------------------------- Def. 6
def compromised_matchings(prior: np.ndarray, present: np.ndarray, compromised: CompromisedRecords) -> np.ndarray:
    """``[N, m]`` matched confidence C[i, s]: the CR of the matchings (Def. 6 with Example 4's rule).

    ``prior`` holds the RPD rows the tests CR > RPD compare with (normalized or not), ``present`` the
    values S_Q of each row's group. Per respondent v: an entry with CR = RPD is dropped; if some
    entry on a value of S_Q has CR < RPD, all of v's given entries are dropped and the remainder
    1 − Σ(given CR on S_Q) goes to the values of S_Q without an entry, proportionally to RPD over
    them; then entries with CR > RPD are the matchings. Certain entries (CR = 1) are removed by
    :func:`bayesian_posterior` beforehand; here they would be ordinary entries.
    """
    row, value, confidence = (np.asarray(x) for x in compromised)
    N, m = prior.shape
    C = np.zeros((N, m))
    if len(row) == 0:
        return C
    rpd = prior[row, value]
    in_group = present[row, value]
    contradicted = np.zeros(N, dtype=bool)  # some CR(v, s) < RPD(v, s) on a value of S_Q
    contradicted[row[in_group & (confidence < rpd - _EQUAL)]] = True
    given = np.zeros((N, m))
    given[row[in_group], value[in_group]] = confidence[in_group]
    has_entry = np.zeros((N, m), dtype=bool)
    has_entry[row, value] = True
    # Example 4: the remainder 1 − Σ given CR, spread over the values of S_Q without an entry
    remainder = np.maximum(1.0 - given.sum(axis=1), 0.0)
    free = present & ~has_entry
    free_prior = np.where(free, prior, 0.0)
    free_total = free_prior.sum(axis=1, keepdims=True)
    free_uniform = free / np.maximum(free.sum(axis=1, keepdims=True), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(free_total > 0, free_prior / free_total, free_uniform)
    stated = np.where(contradicted[:, None], remainder[:, None] * share, given)
    return np.where(present & (stated > prior + _EQUAL), stated, 0.0)


# ---------------------------------------------------------------------------- steps 2-3: closed form
def _segment_sum(values: np.ndarray, segment: np.ndarray, n_groups: int) -> np.ndarray:
    """``[n_groups, m]`` sums of the rows of ``values`` [N, m] per group."""
    m = values.shape[1]
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    return np.bincount(flat, weights=values.ravel(), minlength=n_groups * m).reshape(n_groups, m)


def closed_form_posterior(
    counts: np.ndarray, segment: np.ndarray, observed_value: np.ndarray, matched: np.ndarray, a: float = 1.0
) -> np.ndarray:
    """``[N, m]`` posterior PB (Eq. 2) of every respondent, in closed form (module docstring).

    ``counts[g, s]`` = number of tuples of value s in group g (n_s); row ``i`` is a respondent of
    group ``segment[i]``; ``observed_value[i]`` = s(u(i)), the value of the tuple the observed
    permutation u gives respondent i, or −1 in a group where every permutation ties (x = 0);
    ``matched[i, s]`` = total CR of i's matchings on value s (Def. 6); ``a`` = the common Dirichlet
    parameter. The number of respondents of each group must equal its number of tuples.

    Each row's posterior depends on its own row and its group's sums only, so the rows are computed
    a block at a time (the same floats; at 10^6 records the whole-array form allocated a dozen fresh
    ``[N, m]`` temporaries and grew as n^1.2+); the per-group sums K[s] are one ``np.bincount`` per
    column (the additions of :func:`_segment_sum`, in row order from 0).
    """
    from scipy.special import gammaln

    counts = np.asarray(counts, dtype=float)
    segment = np.asarray(segment, dtype=np.int64)
    observed_value = np.asarray(observed_value, dtype=np.int64)
    matched = np.asarray(matched, dtype=float)
    N, G = len(segment), counts.shape[0]
    m = counts.shape[1]
    if N == 0:
        return np.zeros((0, m))
    sizes = counts.sum(axis=1)
    column = np.empty((G, m))  # K[s]
    for s in range(m):
        column[:, s] = np.bincount(segment, weights=matched[:, s], minlength=G)
    matched_mass = (column * counts).sum(axis=1)  # Σ_s K[s]·m_s
    posterior = np.empty((N, m))
    for lo in range(0, N, _BLOCK):
        hi = min(lo + _BLOCK, N)
        seg = segment[lo:hi]
        match = matched[lo:hi]
        count = counts[seg]  # m_t of the respondent's group
        n = sizes[seg]
        others = matched_mass[seg] - (match * count).sum(axis=1)  # X_i
        pairs = np.maximum(n - 1.0, 1.0)[:, None]
        numerator = count * (a + match + (others[:, None] - column[seg] + match) / pairs)
        value = observed_value[lo:hi]
        observed = value >= 0
        inverse_factorial = np.where(observed, np.exp(-gammaln(np.maximum(n, 1.0))), 0.0)  # 1/(n−1)!
        rows = np.flatnonzero(observed)
        numerator[rows, value[rows]] += inverse_factorial[rows]
        denominator = a * n + inverse_factorial + matched_mass[seg]
        block = numerator / denominator[:, None]
        single = n == 1  # one respondent, one tuple (the formula agrees; kept exact)
        block[single] = count[single]
        posterior[lo:hi] = block
    return posterior


# ---------------------------------------------------------------------------- whole publication
def _check_compromised(compromised, N: int, m: int) -> CompromisedRecords:
    row, value, confidence = (np.asarray(x).ravel() for x in compromised)
    if not (len(row) == len(value) == len(confidence)):
        raise DataError(
            f"compromised row, value, confidence must have equal lengths; got {len(row)}, {len(value)}, {len(confidence)}"
        )
    row, value, confidence = row.astype(np.int64), value.astype(np.int64), confidence.astype(float)
    if len(row) and (row.min() < 0 or row.max() >= N):
        raise DataError(f"compromised row must index the input rows 0..{N - 1}")
    if len(value) and (value.min() < 0 or value.max() >= m):
        raise DataError(f"compromised value must be a sensitive code 0..{m - 1}")
    if not np.isfinite(confidence).all() or (confidence < 0).any() or (confidence > 1).any():
        raise DataError("compromised confidence must lie in [0, 1]")
    if len(np.unique(row * m + value)) != len(row):
        raise DataError("compromised must hold at most one entry per (row, value)")
    if (np.bincount(row, weights=confidence, minlength=N) > 1 + 1e-9).any():
        raise DataError("compromised confidences of one row must sum to at most 1")
    return CompromisedRecords(row, value, confidence)


def bayesian_posterior(
    weights: np.ndarray | None,
    sensitive: np.ndarray,
    segment: np.ndarray,
    n_groups: int,
    n_values: int,
    *,
    a: float = 1.0,
    normalize: bool = True,
    rng: np.random.Generator,
    compromised: CompromisedRecords | tuple | None = None,
    exact_up_to: int | None = None,
    large_groups: Estimator | None = None,
) -> np.ndarray:
    """``[N, m]`` BayFrame posteriors PB^sv (§4.3.1, Eq. 2) for every group of a publication at once.

    Row ``i`` is a respondent of group ``segment[i]`` with prior (RPD^sv) ``weights[i]`` over the
    ``n_values`` sensitive values (``None``: uniform); the group's published multiset is
    ``sensitive[segment == g]``. ``a`` is the common Dirichlet parameter, ``normalize`` restricts the
    priors to each group's values (Table 9), ``rng`` breaks ties in u. ``compromised`` (optional,
    :class:`CompromisedRecords` or a 3-tuple ``(row, value, confidence)``) applies posterior-based
    cascading (§4.4.2): certain entries (CR = 1) remove the respondent and one tuple of its value,
    the others go through Def. 6. Rows of the result sum to 1. With ``exact_up_to`` (the paper's
    procedure, see the module docstring) the groups of more tuples get ``large_groups``' posterior.
    """
    segment = np.asarray(segment, dtype=np.int64)
    sensitive = np.asarray(sensitive, dtype=np.int64)
    N, m, G = len(segment), int(n_values), int(n_groups)
    if sensitive.shape != (N,):
        raise DataError(f"sensitive must have one value per row of segment ({N}); got shape {sensitive.shape}")
    if N == 0:
        return np.zeros((0, m))
    if weights is None:
        weights = np.ones((N, m))
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (N, m):
        raise DataError(f"weights must have shape (n, n_values) = ({N}, {m}); got {weights.shape}")
    if not all(np.isfinite(weights[rows]).all() and (weights[rows] >= 0).all() for rows in _row_blocks(N)):
        raise DataError("weights must be finite and non-negative")
    counts = np.bincount(segment * m + sensitive, minlength=G * m).reshape(G, m)
    entries = _check_compromised(compromised if compromised is not None else ((), (), ()), N, m)

    # §4.4: a certain entry moves its respondent and one tuple of its value to a group of their own
    certain = entries.confidence >= 1.0 - _EQUAL
    certain_row, certain_value = entries.row[certain], entries.value[certain]
    removed = np.bincount(segment[certain_row] * m + certain_value, minlength=G * m).reshape(G, m)
    if (removed > counts).any():
        raise DataError("a certain compromised entry (CR = 1) names a value with no tuple left in its group")
    counts = np.vstack([counts - removed, np.eye(m, dtype=np.int64)[certain_value]])
    segment = segment.copy()
    segment[certain_row] = G + np.arange(len(certain_row))
    G += len(certain_row)
    uncertain = ~certain & ~np.isin(entries.row, certain_row)
    entries = CompromisedRecords(*(x[uncertain] for x in entries))

    present = (counts > 0)[segment]  # S_Q of each respondent's group
    prior = group_restricted_prior(weights, present) if normalize else weights
    sizes = counts.sum(axis=1)
    large = np.zeros(G, dtype=bool) if exact_up_to is None else sizes > exact_up_to
    if large.any():  # the paper's procedure: the Ω-estimate (or another estimator) for large groups
        if large_groups is None:
            raise DataError("exact_up_to needs the large_groups estimator")
        exact_rows = ~large[segment]
        entries = CompromisedRecords(*(x[exact_rows[entries.row]] for x in entries))
        result = np.empty((N, m))
        result[~exact_rows] = _large_group_posterior(large_groups, prior, segment, counts, large, m)
        keep = np.flatnonzero(exact_rows)
        if len(keep):
            small = np.flatnonzero(~large)
            new_group = np.full(G, -1, dtype=np.int64)
            new_group[small] = np.arange(len(small))
            new_row = np.full(N, -1, dtype=np.int64)
            new_row[keep] = np.arange(len(keep))
            result[keep] = _exact_posterior(
                prior[keep], counts[small], new_group[segment[keep]], present[keep],
                CompromisedRecords(new_row[entries.row], entries.value, entries.confidence), a, rng,
            )
        return result
    return _exact_posterior(prior, counts, segment, present, entries, a, rng)


def _large_group_posterior(estimator: Estimator, prior: np.ndarray, segment: np.ndarray, counts: np.ndarray,
                           large: np.ndarray, m: int) -> np.ndarray:
    """The rows of the ``large`` groups, posteriors from ``estimator`` over each group's tuples
    (``counts``: the group's multiset, one tuple per respondent)."""
    rows = np.flatnonzero(large[segment])
    rows = rows[np.argsort(segment[rows], kind="stable")]  # grouped, in row order within a group
    groups = np.flatnonzero(large)
    renumber = np.full(len(large), -1, dtype=np.int64)
    renumber[groups] = np.arange(len(groups))
    tuples = np.repeat(np.tile(np.arange(m), len(groups)), counts[groups].ravel())  # grouped like rows
    posterior = np.asarray(estimator.posterior(prior[rows], tuples, renumber[segment[rows]], len(groups), m), dtype=float)
    return posterior[np.argsort(rows, kind="stable")]  # back to increasing row order


def _exact_posterior(prior: np.ndarray, counts: np.ndarray, segment: np.ndarray, present: np.ndarray,
                     entries: CompromisedRecords, a: float, rng: np.random.Generator) -> np.ndarray:
    """The exact closed form (Eq. 2 with Def. 6) for groups whose rows, prior rows and matchings
    are given (after §4.4's certain entries left them)."""
    N, m = prior.shape
    G = len(counts)
    matched = compromised_matchings(prior, present, entries)

    # u: groups where every permutation ties get none; the others one Hungarian call each
    sizes = counts.sum(axis=1)
    order = np.argsort(segment, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    reference_row = order[np.minimum(starts, N - 1)][segment]  # first respondent of the group
    reference_value = np.argmax(counts > 0, axis=1)[segment]  # a value present in the group
    deviation, scale = np.empty(N), np.empty(N)
    for rows in _row_blocks(N):  # row by row (the same floats as the whole-array form)
        here, ref_row, ref_value = prior[rows], reference_row[rows], reference_value[rows]
        full = here - here[np.arange(len(here)), ref_value][:, None] - prior[ref_row] + prior[ref_row, ref_value][:, None]
        deviation[rows] = np.where(present[rows], np.abs(full), 0.0).max(axis=1, initial=0.0)
        scale[rows] = np.where(present[rows], np.abs(here), 0.0).max(axis=1, initial=0.0)
    group_deviation, group_scale = np.zeros(G), np.zeros(G)
    np.maximum.at(group_deviation, segment, deviation)
    np.maximum.at(group_scale, segment, scale)
    all_tie = group_deviation <= _TIE_RTOL * group_scale
    observed_value = np.full(N, -1, dtype=np.int64)
    values = np.arange(m)
    # u enters the posterior only through the term 1/(n−1)!, added to numerators and a denominator
    # that are all >= a; below a·2^-54 it is less than half an ulp of each, so adding it changes no
    # bit: the Hungarian call (O(n³)) is skipped for such groups (n >= 20 when a = 1).
    from scipy.special import gammaln

    matters = np.exp(-gammaln(np.maximum(sizes, 1.0))) >= a * 2.0**-54
    for g in np.flatnonzero((sizes >= 2) & ~all_tie & matters):
        members = order[starts[g] : starts[g] + sizes[g]]
        tuple_value = np.repeat(values, counts[g])
        u = _max_weight_matching(prior[members[:, None], tuple_value], rng)
        observed_value[members] = tuple_value[u]
    return closed_form_posterior(counts, segment, observed_value, matched, a)


# ---------------------------------------------------------------------------- the plugin
def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class BayesianParams:
    a: float = field(default=1.0, metadata={"help": "common Dirichlet parameter a_l of Def. 1 (> 0; the paper uses 1)"})
    normalize: bool = field(
        default=True,
        metadata={"help": "restrict each prior row to the values of its QI-group and renormalize (Table 9)"},
    )
    seed: int = field(
        default=0,
        metadata={"help": "seed of the generator breaking ties among maximal permutations (>= 0; the bayframe "
                  "attacker breaks them with the attack's own generator instead)"},
    )
    exact_up_to: int | None = field(
        default=None,
        metadata={"help": "the paper's procedure (§4.3.1): the exact posterior for groups of at most this many "
                  "tuples, the large_groups estimator (the Omega-estimate) above; null: exact for every size "
                  "(the lab's closed form). The paper's text read literally (§5.3's O(min(|Q|!, |Q|))): 2"},
    )
    large_groups: Any = plugin_ref(
        "estimator", "omega",
        "the estimator of the groups larger than exact_up_to (the paper: Li et al.'s Omega-estimate); unused when exact_up_to is null",
    )

    def __post_init__(self) -> None:
        require(_is_number(self.a) and self.a > 0, "a", "a finite number > 0", self.a)
        require(isinstance(self.normalize, bool), "normalize", "true or false", self.normalize)
        require(
            isinstance(self.seed, int) and not isinstance(self.seed, bool) and self.seed >= 0,
            "seed",
            "an integer >= 0",
            self.seed,
        )
        require(
            self.exact_up_to is None
            or (isinstance(self.exact_up_to, int) and not isinstance(self.exact_up_to, bool) and self.exact_up_to >= 1),
            "exact_up_to",
            "an integer >= 1 or null",
            self.exact_up_to,
        )
        # large_groups: a plugin reference, validated and built by the core


class BayesianEstimator(Estimator):
    """BayFrame's Bayesian estimator (§4.3.1, Eq. 2), exact for any group size in closed form, or the
    paper's procedure (exact up to ``exact_up_to`` tuples, the Ω-estimate above)."""

    Params = BayesianParams

    def __init__(self, params: BayesianParams | None = None):
        super().__init__(params)
        self.rng = np.random.default_rng(self.params.seed)

    def posterior(
        self,
        weights: np.ndarray | None,
        sensitive: np.ndarray,
        segment: np.ndarray,
        n_groups: int,
        n_values: int,
        compromised: CompromisedRecords | tuple | None = None,
        rng: np.random.Generator | None = None,
    ) -> np.ndarray:
        """Eq. 2 with this estimator's parameters; ``rng`` breaks ties in u (default: the
        instance's own generator, seeded by ``seed``; the bayframe attacker passes the attack's)."""
        return bayesian_posterior(
            weights,
            sensitive,
            segment,
            n_groups,
            n_values,
            a=self.params.a,
            normalize=self.params.normalize,
            rng=self.rng if rng is None else rng,
            compromised=compromised,
            exact_up_to=self.params.exact_up_to,
            large_groups=self.params.large_groups,
        )
