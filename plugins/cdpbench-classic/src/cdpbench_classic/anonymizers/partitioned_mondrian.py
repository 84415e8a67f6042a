"""Partitioned Mondrian: Mondrian's first cuts made by a driver, each part anonymized on its own
(LeFevre, DeWitt, Ramakrishnan, ICDE 2006, §4; the scale-out is the lab's, docs/scale.md
"Past one machine").

Mondrian's decisions about a partition depend only on that partition's records (its widths, its
median, whether the model accepts its children; the normalizers are the schema's domains). So the
recursion splits into a driver that makes the first ``log2(partitions)`` levels of cuts and one
task per part that runs :func:`~cdpbench_classic.anonymizers.mondrian.mondrian_partition` on the
part's records alone. Two ways to make the first cuts:

* ``exact``: the driver runs Mondrian's own first ``log2(P)`` levels on all records
  (:func:`~cdpbench_classic.anonymizers.mondrian.mondrian_first_cuts`). The publication is then
  identical to single-process Mondrian's; the driver holds every record (a single machine's
  memory bounds it).
* ``sample``: the driver sees only a uniform sample (without replacement, drawn with the run's
  rng) of ``sample`` records, and chooses each cut on the sample with Mondrian's rules (widest
  normalized dimension of the sample; its strict lower-median split, or its covering taxonomy
  node's children). A cut is then applied to all records of the part and made only if the model
  accepts every child (all records, not the sample), exactly as Mondrian refuses a cut that is
  not allowable; a refused dimension passes to the next widest, and a part with no accepted
  cut is not cut further by the driver (its task still runs Mondrian on it). No part can thus
  fail the model: the root is accepted and every part is an accepted child. The cuts differ
  from Mondrian's where the sample's median or widest dimension differs from the part's: that,
  and nothing else, is what sample cuts cost in information loss.

Backends: ``local`` runs the parts one after the other in this process; ``ray`` runs each part as
a Ray task (one CPU) on the Ray instance this process is connected to, or on a local one it
starts with ``ray.init(num_cpus=...)``. A task receives its part's QI, sensitive codes and prior
rows, the privacy model and a model context without the release (the model's whole-table
quantities, e.g. t-closeness's table distribution, are the release's, not the part's), and
returns its part's groups. The same function anonymizes a part in both backends, so they
publish the same partition.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from cdpbench.data import History, Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import Anonymizer, ModelContext, PrivacyModel, PublishContext
from cdpbench.schema import Schema

from .mondrian import GroupPredicate, MondrianParams, mondrian_first_cuts, mondrian_partition

CUTS = ("exact", "sample")
BACKENDS = ("local", "ray")


@dataclass
class PartitionedMondrianParams(MondrianParams):
    partitions: int = field(
        default=4,
        metadata={
            "help": "P, a power of two >= 1: the driver makes log2(P) levels of cuts (P parts if every cut is binary; "
            "a categorical cut has one child per taxonomy child, a refused cut none), each part is one task; "
            "1 = single-process Mondrian"
        },
    )
    cuts: str = field(
        default="exact",
        metadata={
            "help": "how the driver finds the first cuts: 'exact' (Mondrian's own, on all records: the publication "
            "equals Mondrian's) or 'sample' (from a uniform sample of `sample` records; a cut the model does not "
            "accept on all records is not made)"
        },
    )
    sample: int = field(default=100_000, metadata={"help": "records in the driver's sample (cuts=sample), >= 1"})
    backend: str = field(
        default="local",
        metadata={"help": "where the parts run: 'local' (this process, one after the other) or 'ray' (one Ray task each)"},
    )
    num_cpus: int | None = field(
        default=None,
        metadata={"help": "CPUs of the local Ray instance started when none is running (backend=ray); null: all"},
    )
    # categorical: Mondrian's own parameter (MondrianParams)

    def __post_init__(self) -> None:
        super().__post_init__()
        P = self.partitions
        require(_is_int(P) and P >= 1 and P & (P - 1) == 0, "partitions", "a power of two >= 1", P)
        require(self.cuts in CUTS, "cuts", "'exact' or 'sample'", self.cuts)
        require(_is_int(self.sample) and self.sample >= 1, "sample", "an integer >= 1", self.sample)
        require(self.backend in BACKENDS, "backend", "'local' or 'ray'", self.backend)
        require(self.num_cpus is None or (_is_int(self.num_cpus) and self.num_cpus >= 1),
                "num_cpus", "null or an integer >= 1", self.num_cpus)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class PartitionedMondrian(Anonymizer):
    """Mondrian past one machine: the driver's first cuts (exact or from a sample), one task per part (local or Ray)."""

    uses_history = False  # reads no ctx.history: publishes each release on its own (issue #28: the run keeps no more than it needs)

    Params = PartitionedMondrianParams

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        p = self.params
        model = ctx.privacy_model
        name = getattr(model, "plugin_name", type(model).__name__)
        accepts = ctx.predicate(release)
        levels = int(math.log2(p.partitions))
        n = len(release)
        if p.cuts == "exact":
            part, is_open, stats = mondrian_first_cuts(release, accepts, levels)
            refused = 0
        else:
            part, is_open, stats = sample_first_cuts(release, accepts, levels, p.sample, ctx.rng)
            refused = stats["refused_cuts"]
        info = {"anonymizer": "partitioned_mondrian", "privacy_model": name, "partitions": p.partitions,
                "cuts": p.cuts, "backend": p.backend, "suppressed_all": stats["suppressed_all"]}
        if stats["suppressed_all"]:
            info.update(tasks=0, n_groups=0, refused_cuts=0, largest_task=0)
            info["reason"] = f"the whole release ({n} records) does not satisfy {name}: every record suppressed"
            return Publication.from_partition(release, part, categorical=p.categorical, info=info)

        # the records of each open part (a task), in record order
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(len(is_open) + 1))
        tasks = [order[bounds[g]:bounds[g + 1]] for g in np.flatnonzero(is_open)]
        task_model_context = replace(ctx.model_context, release=None, prior=None)
        prior = ctx.model_context.prior
        # one part's arrays at a time: the local backend holds one copy, Ray's object store takes each as it goes
        inputs = ((release.qi[rows], release.sensitive[rows], None if prior is None else prior[rows]) for rows in tasks)
        if p.backend == "local":
            results = [anonymize_part(release.schema, qi, s, pr, model, task_model_context) for qi, s, pr in inputs]
        else:
            results = run_on_ray(inputs, release.schema, model, task_model_context, p.num_cpus)

        # closed parts are final groups (Mondrian refused every cut there); open parts bring their groups
        group = np.where(is_open[part], -1, part)
        next_label = len(is_open)
        for rows, local in zip(tasks, results):  # an accepted part is never suppressed; -1 kept all the same
            group[rows] = np.where(local >= 0, next_label + local, -1)
            next_label += max(int(local.max()) + 1, 0)
        group = _number_by_first_record(group)
        info.update(tasks=len(tasks), n_groups=int(group.max()) + 1 if n else 0, refused_cuts=refused,
                    largest_task=max((len(r) for r in tasks), default=0))
        return Publication.from_partition(release, group, categorical=p.categorical, info=info)


def anonymize_part(schema: Schema, qi: np.ndarray, sensitive: np.ndarray, prior: np.ndarray | None,
                   model: PrivacyModel, model_context: ModelContext) -> np.ndarray:
    """One task: Mondrian on one part's records alone; its groups numbered from 0 (a Ray task in
    the ``ray`` backend, a call in the ``local`` one). ``model_context`` carries the release's
    whole-table quantities; the part's prior rows ride in the batches as they do in
    :meth:`PublishContext.predicate`."""
    part = Release(1, schema, np.arange(len(qi), dtype=np.int64), qi, sensitive)
    ctx = PublishContext(model, replace(model_context, prior=prior), History(), np.random.default_rng(0))
    group, _ = mondrian_partition(part, ctx.predicate(part))
    return group


def run_on_ray(inputs: Iterable[tuple], schema: Schema, model: PrivacyModel, model_context: ModelContext,
               num_cpus: int | None) -> list[np.ndarray]:
    """Each part as a Ray task (one CPU); starts a local Ray instance when this process is not
    connected to one. The parts' arrays go through the object store; each task returns its groups."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    task = ray.remote(num_cpus=1)(anonymize_part)
    schema_ref, model_ref, mctx_ref = ray.put(schema), ray.put(model), ray.put(model_context)  # once, not per task
    refs = [task.remote(schema_ref, qi, s, pr, model_ref, mctx_ref) for qi, s, pr in inputs]
    return ray.get(refs)


def sample_first_cuts(release: Release, accepts: GroupPredicate, levels: int, sample: int,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict]:
    """``levels`` levels of cuts chosen on a uniform sample of ``sample`` records with Mondrian's
    rules and made on all records where the model accepts every child (module docstring).
    Returns ``part`` (record -> part, numbered by smallest record index), ``open`` (every part:
    its task runs Mondrian on it) and counts, as :func:`mondrian_first_cuts` does."""
    schema = release.schema
    qi = np.asarray(release.qi, dtype=float)
    n, d = qi.shape
    stats = {"suppressed_all": False, "refused_cuts": 0}
    if n == 0:
        return np.empty(0, dtype=np.int64), np.zeros(0, dtype=bool), stats
    if not bool(accepts(np.arange(n), np.zeros(n, dtype=np.int64), 1)[0]):
        stats["suppressed_all"] = True
        return np.full(n, -1, dtype=np.int64), np.zeros(0, dtype=bool), stats
    taxonomies = [a.taxonomy if a.kind == "categorical" else None for a in schema.qi]
    domain = np.array([float(t.size) if t is not None else a.width for a, t in zip(schema.qi, taxonomies)])
    in_sample = np.zeros(n, dtype=bool)
    in_sample[rng.choice(n, size=min(sample, n), replace=False)] = True

    parts = [np.arange(n, dtype=np.int64)]  # records of each part; cut further while `cuttable`
    cuttable = [True]
    for _ in range(levels):
        next_parts, next_cuttable = [], []
        for rows, go_on in zip(parts, cuttable):
            children = _sample_cut(rows, qi, in_sample, taxonomies, domain, accepts, stats) if go_on else None
            if children is None:
                next_parts.append(rows)
                next_cuttable.append(False)
            else:
                next_parts += children
                next_cuttable += [True] * len(children)
        parts, cuttable = next_parts, next_cuttable
    part = np.empty(n, dtype=np.int64)
    for i, rows in enumerate(parts):
        part[rows] = i
    part = _number_by_first_record(part)
    return part, np.ones(len(parts), dtype=bool), stats


def _sample_cut(rows: np.ndarray, qi: np.ndarray, in_sample: np.ndarray, taxonomies: list, domain: np.ndarray,
                accepts: GroupPredicate, stats: dict) -> list[np.ndarray] | None:
    """The children of one part under the first cut, in Mondrian's dimension order on the part's
    sample, that the model accepts on all the part's records; ``None`` if there is none."""
    S = qi[rows[in_sample[rows]]]
    if len(S) < 2:
        return None
    d = qi.shape[1]
    lo, hi = S.min(axis=0), S.max(axis=0)
    width = np.zeros(d)
    cover_level: dict[int, int] = {}
    for j, tax in enumerate(taxonomies):
        if tax is None:
            width[j] = (hi[j] - lo[j]) / domain[j] if domain[j] > 0 else 0.0
        else:
            level, c_lo, c_hi = tax.covering_range(np.array([int(lo[j])]), np.array([int(hi[j])]))
            width[j] = (c_hi[0] - c_lo[0] + 1) / domain[j]
            cover_level[j] = int(level[0])
    splittable = hi > lo
    for j in np.lexsort((np.arange(d), -np.where(splittable, width, -1.0))):
        if not splittable[j]:
            break  # later dimensions are unsplittable too
        x = qi[rows, j]
        if taxonomies[j] is None:
            v = np.sort(S[:, j])
            m = v[(len(v) - 1) // 2]  # the sample's lower median; the strict cut with the larger smaller side
            n_le, n_lt = int((v <= m).sum()), int((v < m).sum())
            balance_le = min(n_le, len(v) - n_le) if n_le < len(v) else -1
            balance_lt = min(n_lt, len(v) - n_lt) if n_lt > 0 else -1
            label = (x > m) if balance_le >= balance_lt else (x >= m)
            label = label.astype(np.int64)
        else:
            # the children of the sample's covering node (a record the sample missed outside that
            # node lands in its own node of the same level)
            label = taxonomies[j].node_of_leaf[cover_level[j] - 1, x.astype(np.int64)].astype(np.int64)
        present = np.bincount(label) > 0
        n_children = int(present.sum())
        if n_children < 2:
            continue
        segment = (np.cumsum(present) - 1)[label]
        if bool(np.all(accepts(rows, segment, n_children))):
            order = np.argsort(segment, kind="stable")
            bounds = np.searchsorted(segment[order], np.arange(n_children + 1))
            return [rows[order[bounds[c]:bounds[c + 1]]] for c in range(n_children)]
        stats["refused_cuts"] += 1
    return None


def _number_by_first_record(group: np.ndarray) -> np.ndarray:
    """Group labels renumbered 0..G-1 in order of each group's smallest record index (Mondrian's
    numbering); -1 (suppressed) stays."""
    keep = group >= 0
    labels, first = np.unique(group[keep], return_index=True)
    rank = np.empty(len(labels), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(labels))
    out = np.full(len(group), -1, dtype=np.int64)
    out[keep] = rank[np.searchsorted(labels, group[keep])]
    return out
