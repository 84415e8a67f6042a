"""Equivalence classes of one release as a correspondence attack sees them (BCF §3).

A *class* (the paper's ``qid``) is a set of published records sharing one generalized QI; a
*group* ``g`` is the records of a class that share a sensitive value. :class:`Classes` keeps, per
class, its generalized QI as an inclusive box (categorical columns: a leaf-code range, which is
exactly a taxonomy node; or an arbitrary value set when a publication's value set is not a range,
e.g. Mondrian's ``categorical=set``) and, per non-empty group, ``(class, value, count)`` sorted by
class then value. Counts may be replaced (:meth:`Classes.with_counts`): the composed attacks of §7.1
attack a release from which a B-attack has already removed records.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from cdpbench.data import Publication, PublicView


@dataclass(frozen=True)
class Classes:
    low: np.ndarray  # float64 [G, d] inclusive lower bound (categorical: lowest leaf code)
    high: np.ndarray  # float64 [G, d]
    sets: dict[int, np.ndarray]  # categorical column -> bool [G, L], only where some set is not a range
    entry_class: np.ndarray  # int64 [E] class of each group, sorted by class then value
    entry_value: np.ndarray  # int64 [E]
    entry_count: np.ndarray  # int64 [E] |g|
    n_values: int

    @property
    def n_classes(self) -> int:
        return int(self.low.shape[0])

    @property
    def size(self) -> np.ndarray:
        """``[G]`` |qid| of every class."""
        return np.bincount(self.entry_class, weights=self.entry_count, minlength=self.n_classes).astype(np.int64)

    @property
    def entry_ptr(self) -> np.ndarray:
        """``[G + 1]`` CSR pointer: the groups of class ``c`` are entries ``ptr[c]:ptr[c+1]``."""
        return np.searchsorted(self.entry_class, np.arange(self.n_classes + 1)).astype(np.int64)

    def with_counts(self, count: np.ndarray) -> "Classes":
        """The same classes and groups with group sizes ``count`` (aligned with the entries)."""
        return replace(self, entry_count=np.asarray(count, dtype=np.int64))

    @classmethod
    def build(
        cls,
        low: np.ndarray,
        high: np.ndarray,
        value_sets: dict[int, np.ndarray],
        klass: np.ndarray,
        sensitive: np.ndarray,
        n_values: int,
    ) -> "Classes":
        """From per-class boxes and per-record (class, sensitive value)."""
        G = int(low.shape[0])
        key = np.asarray(klass, dtype=np.int64) * n_values + np.asarray(sensitive, dtype=np.int64)
        if G * n_values <= 4 * len(key) + 1024 and (not len(key) or key.min() >= 0):  # counting: np.unique's result, linear
            count = np.bincount(key, minlength=G * n_values)
            uniq = np.flatnonzero(count)
            count = count[uniq]
        else:
            uniq, count = np.unique(key, return_counts=True)
        sets = {}
        for j, vs in value_sets.items():
            width = high[:, j] - low[:, j] + 1
            if G and not np.array_equal(vs.sum(axis=1), width.astype(np.int64)):
                sets[j] = np.asarray(vs, dtype=bool)
        return cls(
            np.asarray(low, dtype=float),
            np.asarray(high, dtype=float),
            sets,
            uniq // n_values,
            uniq % n_values,
            count.astype(np.int64),
            int(n_values),
        )

    @classmethod
    def from_view(cls, view: PublicView) -> "Classes":
        """What an adversary reads off a public view: boxes and the multiset of values per class."""
        view.require_records("the correspondence attacks")  # a counted view (issue #29) has no records
        return cls.build(view.low, view.high, view.value_sets, view.group, view.sensitive, view.schema.sensitive.size)

    @classmethod
    def from_publication(cls, pub: Publication) -> "Classes":
        return cls.build(pub.low, pub.high, pub.value_sets, pub.group, pub.sensitive, pub.schema.sensitive.size)
