"""Generalization taxonomies (value hierarchies) for categorical attributes.

Leaves are coded 0..L-1 in an order where every taxonomy node covers a *contiguous* range of leaf
codes. Generalizing a set of leaves to a node is then an interval operation on codes, which keeps
the hot paths (Mondrian splits, NCP, EMD) in NumPy.

Taxonomies load from ARX's hierarchy CSV format: one line per leaf, ``;``-separated, the leaf value
first, then its ancestors level by level, ``*`` (the root) last.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DataError


@dataclass(frozen=True, eq=False)
class Taxonomy:
    """A tree over a categorical domain.

    Attributes:
        leaves: leaf values, index = leaf code.
        node_of_leaf: ``[height + 1, L]`` int array; row ``h`` gives, for every leaf, the index of
            its ancestor at level ``h`` (level 0 = the leaf itself, level ``height`` = the root).
        low, high: per level, the inclusive leaf-code range covered by each node of that level.
        names: per level, the label of each node.
    """

    leaves: tuple[str, ...]
    node_of_leaf: np.ndarray
    low: tuple[np.ndarray, ...]
    high: tuple[np.ndarray, ...]
    names: tuple[tuple[str, ...], ...]

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_paths(cls, paths: list[list[str]]) -> "Taxonomy":
        """Build from one path per leaf: ``[leaf, parent, ..., root]`` (all of equal length)."""
        if not paths:
            raise DataError("taxonomy has no leaves")
        height = len(paths[0]) - 1
        for p in paths:
            if len(p) != height + 1:
                raise DataError(f"taxonomy rows must all have {height + 1} levels; row {p!r} has {len(p)}")
        leaf_names = [p[0] for p in paths]
        if len(set(leaf_names)) != len(leaf_names):
            dup = sorted({v for v in leaf_names if leaf_names.count(v) > 1})
            raise DataError(f"taxonomy lists leaf values more than once: {dup}")
        # A node is identified by its path to the root; order leaves so that every node is a
        # contiguous range, keeping the file's order of first appearance at every level.
        first_seen: list[dict[tuple[str, ...], int]] = [{} for _ in range(height + 1)]
        for p in paths:
            for h in range(height + 1):
                first_seen[h].setdefault(tuple(p[h:]), len(first_seen[h]))
        order = sorted(
            range(len(paths)),
            key=lambda i: tuple(first_seen[h][tuple(paths[i][h:])] for h in range(height, -1, -1)),
        )
        paths = [paths[i] for i in order]
        L = len(paths)
        node_of_leaf = np.zeros((height + 1, L), dtype=np.int64)
        lows, highs, names = [], [], []
        for h in range(height + 1):
            ids: dict[tuple[str, ...], int] = {}
            for code, p in enumerate(paths):
                node_of_leaf[h, code] = ids.setdefault(tuple(p[h:]), len(ids))
            idx = node_of_leaf[h]
            n_nodes = len(ids)
            lo = np.full(n_nodes, L, dtype=np.int64)
            hi = np.full(n_nodes, -1, dtype=np.int64)
            np.minimum.at(lo, idx, np.arange(L))
            np.maximum.at(hi, idx, np.arange(L))
            lows.append(lo)
            highs.append(hi)
            names.append(tuple(k[0] for k in ids))
        return cls(tuple(p[0] for p in paths), node_of_leaf, tuple(lows), tuple(highs), tuple(names))

    @classmethod
    def from_arx_csv(cls, path: str | Path) -> "Taxonomy":
        """Load an ARX hierarchy file (``leaf;level1;...;*``)."""
        text = Path(path).read_text(encoding="utf-8")
        rows = [line.strip().split(";") for line in text.splitlines() if line.strip()]
        rows = [[c.strip() for c in r] for r in rows]
        if rows and rows[0][-1] != "*":
            raise DataError(f"{path}: an ARX hierarchy ends every row with '*' (got {rows[0][-1]!r})")
        return cls.from_paths(rows)

    @classmethod
    def from_prefixes(cls, codes: list[str] | tuple[str, ...]) -> "Taxonomy":
        """The prefix hierarchy of equal-length codes (zip codes): a node per common prefix,
        labelled by the prefix padded with ``*`` (``47906 -> 4790* -> 479** -> 47***``).

        Leaves are the codes in sorted order, so every prefix is a contiguous range of leaf codes
        and the node covering a set of codes is the one of their longest common prefix. A prefix
        length is a level only if it merges something: a level whose nodes hold the same codes as
        the level below is dropped. So when every code starts with ``47``, ``4****`` and ``*``
        are dropped and ``47***`` is the root; the empty prefix, when kept, is labelled ``*``.
        """
        codes = [str(c) for c in codes]
        if not codes:
            raise DataError("taxonomy has no leaves")
        width = len(codes[0])
        if width == 0 or any(len(c) != width for c in codes):
            lengths = sorted({len(c) for c in codes})
            raise DataError(f"a prefix taxonomy needs non-empty codes of equal length; got lengths {lengths}")
        codes = sorted(codes)
        levels = [width]  # prefix lengths kept, leaf first
        for k in range(width - 1, -1, -1):
            if len({c[:k] for c in codes}) < len({c[: levels[-1]] for c in codes}):
                levels.append(k)

        def label(code: str, k: int) -> str:
            return code[:k] + "*" * (width - k) if k else "*"

        return cls.from_paths([[label(c, k) for k in levels] for c in codes])

    @classmethod
    def flat(cls, values: list[str] | tuple[str, ...]) -> "Taxonomy":
        """A two-level taxonomy: every value directly under the root ``*``."""
        return cls.from_paths([[str(v), "*"] for v in values])

    # ------------------------------------------------------------------ queries
    @property
    def height(self) -> int:
        return self.node_of_leaf.shape[0] - 1

    @property
    def size(self) -> int:
        return len(self.leaves)

    def code(self) -> dict[str, int]:
        return {v: i for i, v in enumerate(self.leaves)}

    def covering_level(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Lowest level whose node contains both leaf codes ``lo`` and ``hi`` (vectorized)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        same = self.node_of_leaf[:, lo] == self.node_of_leaf[:, hi]
        return np.argmax(same, axis=0)

    def covering_range(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The smallest node containing leaf codes ``lo..hi``: its level and its leaf-code range."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        level = self.covering_level(lo, hi)
        node = self.node_of_leaf[level, lo]
        out_lo = np.empty_like(lo)
        out_hi = np.empty_like(hi)
        for h in np.unique(level):
            sel = level == h
            out_lo[sel] = self.low[h][node[sel]]
            out_hi[sel] = self.high[h][node[sel]]
        return level, out_lo, out_hi

    def children_cuts(self, lo: int, hi: int) -> np.ndarray:
        """Leaf codes where the children of the node covering ``lo..hi`` start (first excluded)."""
        level = int(self.covering_level(np.array([lo]), np.array([hi]))[0])
        if level == 0:
            return np.empty(0, dtype=np.int64)
        node = self.node_of_leaf[level, lo]
        n_lo, n_hi = self.low[level][node], self.high[level][node]
        child = self.node_of_leaf[level - 1, n_lo : n_hi + 1]
        return n_lo + np.flatnonzero(np.diff(child)) + 1

    def __repr__(self) -> str:  # pragma: no cover - cosmetic
        return f"Taxonomy({self.size} leaves, height {self.height})"
