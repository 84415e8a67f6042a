"""Beliefs over a group's sensitive values: normalized beliefs, entropy, the Jensen–Shannon
divergence of a group's beliefs and their running sums.

Two privacy models judge a QI-group Q by how much the beliefs about its respondents differ:

* JS-reduce (Riboni, Pareschi, Bettini, TDSC 2012, §6.2; ``cdpbench_jsreduce``'s ``js_reduce``
  model): the beliefs RBK^sv (BK^sv for a respondent seen for the first time), in bits;
* BayFrame's J-similarity (Amiri, Yazdani, Shakery, Ho, TDP 2019, §5.1, Eq. 6, Def. 7 (b);
  ``cdpbench_bayframe``'s ``j_similarity`` model): the revised prior beliefs RPD_sv (PD_sv at the
  first release), logarithms in a base of the user's choice.

Both take the Jensen–Shannon divergence (after Lin 1991) of the u belief rows of Q with equal
weights π^i = w_i = 1/|Q| (JS-reduce §6.2: "we assign the same weight to each probability
distribution"; BayFrame §5.1: "we assume the same value for all w_i"):

    JS(rho_1..rho_u) = H(sum_i w_i rho_i) - sum_i w_i H(rho_i),   H the Shannon entropy.

Readings shared by both models:

* Each belief row is scaled to sum 1 first (revised beliefs may be raw: JS-reduce §5.3 and
  Table 4b, BayFrame Eq. 3); a row with no mass at all counts as the uniform distribution
  (:func:`normalized_beliefs`). ``0 · log 0 = 0`` (:func:`entropy`).
* The divergence of two distributions lies in [0, log_b 2] (= [0, 1] in bits); for u > 2 rows it
  can reach log_b(min(u, m)).
* An empty group, and a group of one respondent, has divergence 0.

:func:`js_divergence` judges every group of a batch in one vectorized pass (``np.bincount`` by
group); :class:`BeliefSums` keeps the same sums per group as running sums, so that "each group
plus one record" and "every prefix of a sequence of records" get the very floats
:func:`js_divergence` computes (the models' :class:`~cdpbench.plugin.GroupExtension` fast paths).
:func:`checked_prior` is the check both models make of the defender's prior beliefs.
"""

from __future__ import annotations

import math

import numpy as np

from cdpbench.errors import ConfigError, DataError


# ---------------------------------------------------------------------------- the defender's prior
def checked_prior(
    prior: np.ndarray | None, n: int, n_values: int, *, model: str, beliefs: str = "beliefs", example: str = ""
) -> np.ndarray:
    """The defender's prior beliefs about every record (``GroupBatch.prior``, ``ModelContext.prior``)
    as a float ``[n, n_values]`` array (records x sensitive values), checked.

    Raises :class:`ConfigError` when there is none — "privacy_model ``model`` needs the defender's
    ``beliefs`` about every record (GroupBatch.prior); set knowledge=<name>", followed by
    " (e.g. knowledge=``example``)" when ``example`` names a knowledge plugin — and
    :class:`DataError` for another shape or a negative or non-finite entry.
    """
    if prior is None:
        hint = f" (e.g. knowledge={example})" if example else ""
        raise ConfigError(
            f"privacy_model {model} needs the defender's {beliefs} about every record (GroupBatch.prior); "
            f"set knowledge=<name>{hint}"
        )
    prior = np.asarray(prior, dtype=float)
    if prior.shape != (n, n_values):
        raise DataError(f"prior must have shape ({n}, {n_values}) (records x sensitive values); got {prior.shape}")
    if (prior < 0).any() or not np.isfinite(prior).all():
        raise DataError("prior beliefs must be finite and non-negative")
    return prior


# ---------------------------------------------------------------------------- one row at a time
def normalized_beliefs(beliefs: np.ndarray) -> np.ndarray:
    """Rows of ``beliefs`` (``[n, m]``) scaled to sum 1: the distributions rho_i (BayFrame) / p^i
    (JS-reduce) of the divergence; an all-zero row becomes uniform."""
    b = np.asarray(beliefs, dtype=float)
    total = b.sum(axis=1, keepdims=True)
    if (total > 0).all():
        return b / total
    m = b.shape[1]
    return np.where(total > 0, b / np.where(total > 0, total, 1.0), 1.0 / max(m, 1))


def entropy(p: np.ndarray, base: float = 2.0) -> np.ndarray:
    """``[n]`` Shannon entropy H (logarithms in base ``base``; 2: bits) of each row of ``p``
    (``[n, m]``, rows summing to 1; ``0 log 0 = 0``). Base 2 takes ``log2``, any other base
    ``log`` divided by ``log(base)``."""
    p = np.asarray(p, dtype=float)
    if base == 2.0:
        log = np.log2(p, out=np.zeros_like(p), where=p > 0)
        return -np.einsum("ij,ij->i", p, log)
    log = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.einsum("ij,ij->i", p, log) / math.log(base)


# ---------------------------------------------------------------------------- a batch of groups
# ---------------------------------------------------------------------------- the divergence, by blocks
_BLOCK = 1 << 14  # rows per block: the block's temporaries stay in cache (and below malloc's mmap threshold)


def _block_entropy(p_of, n: int, base: float) -> np.ndarray:
    """``[n]`` :func:`cdpbench.beliefs.entropy` of the rows ``p_of(lo, hi)`` gives, a block of rows at a time
    (each row's entropy depends on that row alone: the same floats as one call on every row)."""
    out = np.empty(n)
    for lo in range(0, n, _BLOCK):
        hi = min(lo + _BLOCK, n)
        out[lo:hi] = entropy(p_of(lo, hi), base)
    return out


def js_divergence(beliefs: np.ndarray, segment: np.ndarray, n_groups: int, base: float = 2.0) -> np.ndarray:
    """``[n_groups]`` Jensen–Shannon divergence with equal weights (JS-reduce §6.2; BayFrame Eq. 6,
    w_i = 1/|Q|), logarithms in ``base`` (2: bits), of the belief rows of each group: row ``i`` of
    ``beliefs`` (``[n, m]``, scaled to sum 1 as :func:`normalized_beliefs` does: ``b / total``, an
    all-zero row uniform) belongs to group ``segment[i]``. The per-group sums are ``np.bincount``
    sums (one addition per record, in record order, from 0), the result ``max(H(mean) - mean
    entropy, 0)``. An empty group, and a group of one respondent, has divergence 0.

    The normalized rows and their entropies are made a block of rows at a time and each column's
    per-group sum is one ``bincount`` (the same additions as one flat ``bincount`` over all
    cells): whole ``[n, m]`` temporaries at 10^6 records are fresh 150 MB arrays (page faults,
    cache misses) and made the time grow as n^1.37 from 10^5 to 10^6."""
    segment = np.asarray(segment, dtype=np.int64)
    b = np.asarray(beliefs, dtype=float)
    n, m = b.shape
    G = int(n_groups)
    total = b.sum(axis=1)
    positive = total > 0
    safe = np.where(positive, total, 1.0)
    fill = 1.0 / max(m, 1)
    all_positive = bool(positive.all())

    def normalized(lo: int, hi: int) -> np.ndarray:
        block = b[lo:hi] / safe[lo:hi, None]
        if not all_positive:
            block = np.where(positive[lo:hi, None], block, fill)
        return block

    per = np.maximum(np.bincount(segment, minlength=G), 1).astype(float)
    mean = np.empty((G, m))
    for s in range(m):
        column = b[:, s] / safe
        if not all_positive:
            column = np.where(positive, column, fill)
        mean[:, s] = np.bincount(segment, weights=column, minlength=G)
    mean /= per[:, None]
    mean_entropy = np.bincount(segment, weights=_block_entropy(normalized, n, base), minlength=G) / per
    mean_h = _block_entropy(lambda lo, hi: mean[lo:hi], G, base)
    return np.maximum(mean_h - mean_entropy, 0.0)


# ---------------------------------------------------------------------------- running sums
class BeliefSums:
    """Running per-group sums of the divergence of :func:`js_divergence`, for a privacy model's
    :class:`~cdpbench.plugin.GroupExtension` (JS-reduce's ``JSExtension``, J-similarity's
    ``JSimilarityExtension``).

    Built from the defender's prior beliefs about every record of the release (``prior``, ``[n, m]``,
    already checked: :func:`checked_prior`) and the initial groups (record ``rows[i]`` in group
    ``segment[i]``, ``n_groups`` groups), it keeps

    * per record: ``rho`` (``[n, m]``) the normalized belief rows rho_i and ``rho_entropy``
      (``[n]``) their entropies H(rho_i), in base ``base``;
    * per group Q: ``mass`` (``[G, m]``) = sum_i rho_i, ``entropy_sum`` (``[G]``) = sum_i H(rho_i)
      and ``size_plus`` (``[G]``, float) = |Q| + 1, the size of the group with one more record.

    so that JS(Q ∪ {row}) = H((mass + rho_row) / (|Q| + 1)) - (entropy_sum + H(rho_row)) / (|Q| + 1)
    (:meth:`divergence_plus`); :meth:`add` appends a record for good; :meth:`divergence_prefixes`
    judges every prefix of sequences of records.

    Why the floats are those of :func:`js_divergence` on the grown groups: each normalized row
    and its entropy depend on that row alone (computed once per release here, row by row there),
    and :func:`js_divergence` sums them per group with ``np.bincount``, i.e. one float addition
    per record in the group's record order, starting at 0. The sums here are built by the same
    additions: ``bincount`` over the initial groups and one addition per appended record
    (:meth:`divergence_plus`, :meth:`add`), or a running ``np.cumsum`` along a sequence restarted at
    its first record (:meth:`divergence_prefixes`) — never differences of sums. The group sizes are
    exact integers as floats; the means, the entropy of the mean (:func:`entropy` on a C-contiguous
    ``[., m]`` array) and the ``max(., 0)`` are then the same operations on the same numbers.
    """

    def __init__(
        self, prior: np.ndarray, rows: np.ndarray, segment: np.ndarray, n_groups: int, base: float = 2.0
    ):
        self.base = base
        self.rho = normalized_beliefs(np.ascontiguousarray(prior))  # [n, m] rho_i, row by row as in js_divergence
        self.rho_entropy = entropy(self.rho, base)  # [n] H(rho_i)
        rows = np.asarray(rows, dtype=np.int64)
        segment = np.asarray(segment, dtype=np.int64)
        G, m = int(n_groups), self.rho.shape[1]
        flat = (segment[:, None] * m + np.arange(m)).ravel()
        # (np.bincount of no records gives int zeros, whatever the weights: hence the float dtype)
        self.mass = np.bincount(flat, weights=self.rho[rows].ravel(), minlength=G * m).reshape(G, m).astype(float)
        self.entropy_sum = np.bincount(segment, weights=self.rho_entropy[rows], minlength=G).astype(float)
        self.size_plus = (np.bincount(segment, minlength=G) + 1).astype(float)  # |Q| + 1, exact
        self._per_plus = self.size_plus[:, None]  # a [G, 1] view of it
        self._rho_entropy = self.rho_entropy.tolist()  # (a Python float per record: fast scalar reads)

    def divergence_plus(self, row: int, at: slice | np.ndarray = slice(None)) -> np.ndarray:
        """JS(Q ∪ {row}) of the groups ``at`` (a slice or an int array of groups; default all),
        the floats :func:`js_divergence` computes on those groups with record ``row`` appended."""
        mean = self.mass[at] + self.rho[row]
        mean /= self._per_plus[at]
        mean_entropy = self.entropy_sum[at] + self._rho_entropy[row]
        mean_entropy /= self.size_plus[at]
        return np.maximum(entropy(mean, self.base) - mean_entropy, 0.0)

    def add(self, g: int, row: int) -> None:
        """Q_g := Q_g ∪ {row} for good."""
        self.size_plus[g] += 1.0
        self.mass[g] += self.rho[row]
        self.entropy_sum[g] += self._rho_entropy[row]

    def divergence_prefixes(self, rows: np.ndarray) -> np.ndarray:
        """``[B, L]``: JS of the group of records ``rows[b, :l + 1]``, every prefix of every row of
        ``rows`` (int ``[B, L]``) at once, independent of the groups kept here, in O(B·L·m).

        The sums are running sums along each row of ``rows`` restarted at its first record
        (``np.cumsum``: one addition per record in record order, the very additions ``np.bincount``
        makes in :func:`js_divergence`; the first term gets ``+ 0.0`` as bincount's ``0 + x`` does,
        which only turns ``-0.0`` — the entropy of a point mass — into ``0.0``)."""
        rows = np.asarray(rows, dtype=np.int64)
        B, L = rows.shape
        m = self.rho.shape[1]
        if B * L == 0:
            return np.zeros((B, L))
        terms = self.rho[rows]  # [B, L, m], a fresh copy
        terms[:, 0] += 0.0
        mass = np.cumsum(terms, axis=1)
        h = self.rho_entropy[rows]  # [B, L]
        h[:, 0] += 0.0
        entropy_sum = np.cumsum(h, axis=1)
        per = np.arange(1, L + 1, dtype=np.int64).astype(float)  # |Q| of each prefix, as bincount(...).astype(float)
        mean = mass / per[None, :, None]
        mean_entropy = entropy_sum / per[None, :]
        h_mean = entropy(np.ascontiguousarray(mean.reshape(B * L, m)), self.base).reshape(B, L)
        return np.maximum(h_mean - mean_entropy, 0.0)
