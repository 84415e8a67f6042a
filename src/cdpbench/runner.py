"""The release loop (DESIGN.md §3).

``dataset.releases() -> for t = 1..T``: defender prior (if the anonymizer asks for one) ->
``anonymizer.publish`` -> the declared privacy model re-verifies the publication (violations are
a metric, never hidden) -> every attacker observes the public view -> every metric -> one row of
numbers per release, recorded (MLflow ``step = t``) by :mod:`cdpbench.recorder`.

Randomness: one :class:`numpy.random.SeedSequence` from ``cfg.seed`` is split into independent
streams for the data set, the anonymizer, each attacker and the metrics, so the same config and
seed give identical numbers whatever the number of parallel jobs. Wall times (``time_*``) are the
only numbers that vary between identical runs.

Memory (issue #28): the run keeps every release and publication (``ctx.history``) only when one of
its components (the anonymizer, the privacy model, a metric, or a plugin one of them references)
declares ``uses_history`` (the default), and an attacker's earlier views only when it declares
``uses_past_views`` (the default); otherwise a component is handed an
:class:`~cdpbench.plugin.UnkeptHistory` / :class:`~cdpbench.plugin.LatestViewOnly`, which raises,
naming it, if read. Nothing of a release stays referenced by the loop once the release is done.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from .data import History
from .datasets.validate import validated
from .errors import CdpbenchError, ConfigError
from .plugin import (
    AttackContext,
    Attacker,
    LatestViewOnly,
    Metric,
    MetricContext,
    ModelContext,
    Plugin,
    PublishContext,
    UnkeptHistory,
    plugin_refs,
)
from .registry import NONE, Registry, default_registry


@dataclass
class Components:
    dataset: Any
    anonymizer: Any
    privacy_model: Any
    knowledge: Any | None
    estimator: Any | None
    attackers: dict[str, Attacker]
    metrics: dict[str, Metric]
    names: dict[str, str] = field(default_factory=dict)


def build(cfg: DictConfig, registry: Registry | None = None) -> Components:
    """Instantiate every component of a run through the registry (validating parameters)."""
    reg = registry or default_registry()

    def make(kind: str, node: Any, where: str | None = None) -> Any:
        if node is None or "name" not in node:
            raise ConfigError(f"{where or kind} must name a plugin; installed: {', '.join(reg.names(kind))}")
        return reg.create(kind, str(node["name"]), node, where)

    names = {}
    dataset = make("dataset", cfg.dataset)
    anonymizer = make("anonymizer", cfg.anonymizer)
    model = make("privacy_model", cfg.privacy_model)
    names.update(dataset=cfg.dataset.name, anonymizer=cfg.anonymizer.name, privacy_model=cfg.privacy_model.name)
    knowledge = estimator = None
    if cfg.get("knowledge") and cfg.knowledge.name != NONE:
        knowledge = make("knowledge", cfg.knowledge)
        names["knowledge"] = cfg.knowledge.name
        if cfg.get("estimator"):
            estimator = make("estimator", cfg.estimator)
            names["estimator"] = cfg.estimator.name
    attackers: dict[str, Attacker] = {}
    if cfg.get("attacker") and cfg.attacker.name != NONE:
        attackers[str(cfg.attacker.get("label") or cfg.attacker.name)] = make("attacker", _without(cfg.attacker, "label"))
        names["attacker"] = cfg.attacker.name
    for label, node in (cfg.get("extra_attackers") or {}).items():
        if label in attackers:
            raise ConfigError(f"extra_attackers.{label}: the label is already used by another attacker")
        attackers[str(label)] = make("attacker", node, f"extra_attackers.{label}")
    metrics: dict[str, Metric] = {}
    for name, node in (cfg.get("metrics") or {}).items():
        if node is not None and node.get("enabled", True):
            metrics[str(name)] = reg.create("metric", str(name), _without(node, "enabled"), f"metrics.{name}")
    if anonymizer.needs_prior and knowledge is None:
        raise ConfigError(
            f"anonymizer {names['anonymizer']!r} needs defender knowledge; set knowledge=<name> "
            f"(installed: {', '.join(reg.names('knowledge'))})"
        )
    if getattr(model, "needs_population", False) and not getattr(dataset, "publishes_population", False):
        offering = [n for n in reg.names("dataset") if getattr(reg.info("dataset", n).cls, "publishes_population", False)]
        raise ConfigError(
            f"privacy_model {names['privacy_model']!r} needs the public population table (Release.population), which "
            f"dataset {names['dataset']!r} does not publish; datasets that do: {', '.join(offering) or 'none installed'}"
        )
    check_counts_readers(cfg, anonymizer, model, knowledge, attackers, metrics, reg)
    return Components(dataset, anonymizer, model, knowledge, estimator, attackers, metrics, names)


def check_counts_readers(cfg: DictConfig, anonymizer: Any, model: Any, knowledge: Any, attackers: dict[str, Attacker],
                         metrics: dict[str, Metric], reg: Registry) -> None:
    """An anonymizer that publishes noisy counts (``publishes = "counts"``, issue #29) is run only
    with a privacy model, attackers and metrics that declare ``reads_counts = True``, and without
    defender knowledge (revised on a publication's records): a :class:`ConfigError` naming the
    first other component, and the installed ones that can read counts."""
    if getattr(anonymizer, "publishes", "records") != "counts":
        return
    anon = cfg.anonymizer.name
    if knowledge is not None:
        raise ConfigError(f"knowledge {cfg.knowledge.name!r} revises the defender's beliefs on published records, but "
                          f"anonymizer {anon!r} publishes noisy counts (no records); set knowledge=none")
    primary = str(cfg.attacker.get("label") or cfg.attacker.name) if cfg.get("attacker") else None
    readers = [("privacy_model", f"privacy_model {cfg.privacy_model.name!r}", model, "privacy_model=NAME")]
    readers += [("attacker", f"attacker {getattr(a, 'plugin_name', label)!r}" if label == primary else f"extra_attackers.{label}",
                 a, "attacker=NAME or attacker=none") for label, a in attackers.items()]
    readers += [("metric", f"metrics.{name}", m, f"metrics.{name}.enabled=false") for name, m in metrics.items()]
    for kind, who, plugin, fix in readers:
        if getattr(plugin, "reads_counts", False):
            continue
        can = []
        for other in reg.names(kind):
            try:
                if getattr(reg.info(kind, other).cls, "reads_counts", False):
                    can.append(other)
            except ConfigError:
                continue
        raise ConfigError(f"{who} cannot read a counts publication (anonymizer {anon!r} publishes noisy counts per "
                          f"grid cell, no records); {kind}s that can: {', '.join(can) or 'none installed'} ({fix})")


def _without(node: DictConfig, key: str) -> dict:
    d = OmegaConf.to_container(node, resolve=True)
    d.pop(key, None)
    return d


def run_releases(
    cfg: DictConfig,
    comp: Components,
    on_release: Callable[[int, dict[str, float]], None] | None = None,
    progress: bool = True,
    label: str | None = None,
) -> pd.DataFrame:
    """Run the release loop; returns one row of metrics per release (index = t)."""
    from tqdm.auto import tqdm

    seeds = np.random.SeedSequence(int(cfg.seed)).spawn(4 + len(comp.attackers))
    data_rng, anon_rng, metric_rng = (np.random.default_rng(s) for s in seeds[:3])
    attack_rngs = {label: np.random.default_rng(s) for label, s in zip(comp.attackers, seeds[4:])}
    # what is kept across releases: the history only when some component reads it, each
    # attacker's earlier views only when it reads them (issue #28: ~140 MB a release at 10^6)
    keep_history = any(_declares(p, "uses_history") for p in _history_readers(comp))
    history = History() if keep_history else UnkeptHistory()
    history_of = _readers_history(comp, history)
    views: dict[str, list] = {label: [] for label in comp.attackers}
    keep_views = {label: any(_declares(p, "uses_past_views") for p in _within(a)) for label, a in comp.attackers.items()}
    rows: list[dict[str, float]] = []
    releases = validated(comp.dataset.releases(data_rng), comp.dataset.scenario)
    total = getattr(comp.dataset.params, "releases", None)
    bar = tqdm(releases, total=total, desc=label or _label(comp), unit="release", disable=not progress, leave=False)
    for release in bar:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        model_ctx = ModelContext(
            schema=release.schema,
            table_distribution=release.sensitive_distribution(),
            history=history_of["privacy_model"],
            release=release,
        )
        # the defender's beliefs about this release's respondents (revised by past releases)
        prior = comp.knowledge.prior(release) if comp.knowledge is not None else None
        model_ctx.prior = prior
        comp.privacy_model.prepare(release, model_ctx)  # a model may set its own beliefs here
        if comp.privacy_model.needs_prior and model_ctx.prior is None:
            raise ConfigError(
                f"privacy_model {comp.names['privacy_model']!r} needs the defender's beliefs; set knowledge=<name>"
            )
        timings["time_prior"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        publication = comp.anonymizer.publish(
            release, PublishContext(comp.privacy_model, model_ctx, history_of["anonymizer"], anon_rng, prior)
        )
        timings["time_publish"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = comp.privacy_model.verify(publication, model_ctx)
        timings["time_verify"] = time.perf_counter() - t0
        view = publication.public()  # what adversaries see; also the defender's view of itself
        if comp.knowledge is not None:
            # Fig. 2 of JS-reduce: the defender computes the posterior an adversary with its
            # knowledge would reach on this publication and revises its beliefs with it.
            t0 = time.perf_counter()
            defender_post = defender_posterior(comp, release, publication, prior)
            comp.knowledge.revise(view, defender_post, publication.respondent)
            timings["time_revise"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        attacks = {}
        for label, attacker in comp.attackers.items():
            if keep_views[label]:
                views[label].append(view)
                seen = views[label]
            else:
                seen = LatestViewOnly(view, len(rows) + 1, f"attacker {label!r} ({_class(attacker)})")
            attacks[label] = attacker.observe(view, AttackContext(release, seen, attack_rngs[label]))
        timings["time_attack"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        row: dict[str, float] = {"violations": float(report.violations), "satisfied": float(report.satisfied)}
        row.update({f"level.{k}": float(v) for k, v in report.levels.items()})
        source = dict.fromkeys(row, f"privacy model {comp.names.get('privacy_model')!r}")
        mctx = MetricContext(release, publication, attacks, report, metric_rng, timings, history)
        for name, metric in comp.metrics.items():
            mctx.history = history_of[f"metric.{name}"]
            for key, value in metric.compute(mctx).items():
                _put(row, source, key, value, f"metric {name!r}")
        for label, result in attacks.items():
            for key, value in result.extra.items():
                _put(row, source, f"{label}.{key}", value, f"attacker {label!r} (its extra {key!r})")
        timings["time_metrics"] = time.perf_counter() - t0
        row.update(timings)
        row["time_total"] = sum(timings.values())
        if keep_history:
            history.releases.append(release)
            history.publications.append(publication)
        else:
            history.advance()
        rows.append(row)
        if on_release:
            on_release(release.t, row)
        # nothing of this release stays referenced while the next one is made (unless kept above)
        del release, publication, view, attacks, mctx, model_ctx, prior, report
    bar.close()
    if not rows:
        raise ConfigError("dataset produced no releases; check dataset.releases")
    return pd.DataFrame(rows, index=pd.RangeIndex(1, len(rows) + 1, name="release"))


def _within(plugin: Any) -> list[Any]:
    """``plugin`` and every plugin its ``Params`` reference (:func:`~cdpbench.plugin.plugin_ref`), recursively."""
    found, todo = [], [plugin]
    while todo:
        p = todo.pop()
        if any(p is q for q in found):
            continue
        found.append(p)
        params = getattr(p, "params", None)
        todo += [getattr(params, name) for name in plugin_refs(type(params))] if params is not None else []
    return found


def _history_readers(comp: Components) -> list[Any]:
    """Every plugin handed ``ctx.history`` (the anonymizer, the privacy model, the metrics) and every
    plugin they reference."""
    return [q for p in (comp.anonymizer, comp.privacy_model, *comp.metrics.values()) for q in _within(p)]


def _declares(plugin: Any, flag: str) -> bool:
    """``plugin`` declares it reads what ``flag`` names (``uses_history``, ``uses_past_views``).
    A plugin of a kind that is never handed it (a knowledge, an estimator) has no such attribute:
    it cannot read it unless the plugin referencing it hands it over, which that one declares."""
    return bool(getattr(plugin, flag, False)) if isinstance(plugin, Plugin) else True


def _class(plugin: Any) -> str:
    return f"{type(plugin).__module__}.{type(plugin).__qualname__}"


def _readers_history(comp: Components, history: History) -> dict[str, History]:
    """The history each reader is handed: the run's own when kept, else an :class:`UnkeptHistory`
    naming the reader in its error."""
    if not isinstance(history, UnkeptHistory):
        return {"privacy_model": history, "anonymizer": history, **{f"metric.{name}": history for name in comp.metrics}}
    names = getattr(comp, "names", {})
    return {
        "privacy_model": history.read_by(f"privacy model {names.get('privacy_model')!r} ({_class(comp.privacy_model)}), "
                                         "through ModelContext.history,"),
        "anonymizer": history.read_by(f"anonymizer {names.get('anonymizer')!r} ({_class(comp.anonymizer)})"),
        **{f"metric.{name}": history.read_by(f"metric {name!r} ({_class(m)})") for name, m in comp.metrics.items()},
    }


def _put(row: dict[str, float], source: dict[str, str], key: str, value, who: str) -> None:
    """``row[key] = float(value)``, refusing a key another producer already wrote: two metrics of
    one name would otherwise overwrite each other silently."""
    if key in row or key.startswith("time_"):
        first = source.get(key, "the release loop's timings")
        raise CdpbenchError(f"metric {key!r} is reported by {first} and by {who}; rename one of them")
    row[key] = float(value)
    source[key] = who


def defender_posterior(comp: Components, release, publication, prior: np.ndarray | None) -> np.ndarray | None:
    """Posterior beliefs ``[p, m]`` on the published records' respondents, from the defender's
    prior (aligned with release rows) and its estimator; ``None`` without an estimator."""
    if comp.estimator is None or prior is None:
        return None
    if publication.angelized:  # its groups publish no values, which the estimators judge
        publication.require_single_partition(f"the defender's estimator {getattr(comp, 'names', {}).get('estimator')!r}")
    weights = prior[np.maximum(publication.row, 0)]
    if publication.counterfeit.any():
        weights = weights.copy()
        weights[publication.counterfeit] = 1.0 / release.n_values
    return comp.estimator.posterior(
        weights, publication.sensitive, publication.group, publication.n_groups, release.n_values
    )


def _label(comp: Components) -> str:
    return f"{comp.names.get('anonymizer')}+{comp.names.get('privacy_model')}"
