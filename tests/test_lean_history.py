"""The run keeps only what its components read (issue #28): the history (every release and
publication) only when some component declares ``uses_history``, an attacker's earlier views only
when it declares ``uses_past_views``; a component that declares it does not read them and reads
them fails with a one-line error naming it."""

import gc
import sys
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from conftest import REPO, SMALL
from cdpbench import runner
from cdpbench.data import History, Publication, PublicView, Release
from cdpbench.errors import CdpbenchError
from cdpbench.plugin import Attacker, LatestViewOnly, Metric, UnkeptHistory, plugin_ref
from cdpbench.registry import register_configs


def config(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=[*SMALL, *overrides])


def deterministic(table):
    return table[[c for c in table.columns if not c.startswith("time_")]]


def run24_config(n: int, releases: int):
    """The 24-release run of ``benchmarks/bench_scale.py`` (Mondrian + distinct 4-diversity, the
    intersection and snapshot attackers, every metric), composed as the CLI does, at ``n`` records."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_scale
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    from cdpbench import launch
    from cdpbench.presets import conf_dir

    argv = [a for a in bench_scale.churn(n, releases) if not a.startswith("dataset.deletions=")]
    argv += [f"dataset.deletions={n // 8}", "anonymizer=mondrian", "privacy_model=l_diversity", "privacy_model.l=4",
             "attacker=intersection", "+extra_attackers.snapshot={name:snapshot}", "tracking.enabled=false",
             "progress=false"]
    from hydra.core.global_hydra import GlobalHydra

    try:
        return launch.prepare(launch.hydra_instance(conf_dir()), argv, multirun=False).jobs[0].cfg
    finally:
        GlobalHydra.instance().clear()


def keep_everything(comp):
    """The former runner's behaviour: every component declared as reading the history and every
    attacker its earlier views, so the run keeps all of them (the oracle of the lean run)."""
    for plugin in [comp.anonymizer, comp.privacy_model, *comp.metrics.values()]:
        plugin.uses_history = True
    for attacker in comp.attackers.values():
        attacker.uses_past_views = True
    return comp


class Alive:
    """Weak references to every Release, Publication and PublicView of one run (what its data set
    yields, its anonymizer publishes, its attackers observe), so that objects other tests left in
    the same process do not count."""

    def __init__(self, comp):
        self.refs: dict[type, list] = {Release: [], Publication: [], PublicView: []}
        releases, publish = comp.dataset.releases, comp.anonymizer.publish

        def tracked_releases(rng):
            for release in releases(rng):
                self.refs[Release].append(weakref.ref(release))
                yield release

        def tracked_publish(release, ctx):
            publication = publish(release, ctx)
            self.refs[Publication].append(weakref.ref(publication))
            return publication

        comp.dataset.releases, comp.anonymizer.publish = tracked_releases, tracked_publish
        for attacker in comp.attackers.values():
            def tracked_observe(view, ctx, observe=attacker.observe):
                self.refs[PublicView].append(weakref.ref(view))
                return observe(view, ctx)

            attacker.observe = tracked_observe

    def __call__(self, cls) -> int:
        gc.collect()
        alive = (ref() for ref in self.refs[cls])
        return len({id(obj) for obj in alive if obj is not None})  # every attacker observes the same view


class EarlierPublished(Metric):
    """Reads the history: records published in every earlier release, and the releases' sizes."""

    def compute(self, ctx):
        h = ctx.history
        return {"earlier_published": float(sum(len(p) for p in h.publications)),
                "earlier_records": float(sum(len(r) for r in h.releases)), "earlier_count": float(len(h))}


class PublishedSize(Metric):
    """This release's records and published records (no history)."""

    uses_history = False

    def compute(self, ctx):
        return {"published": float(len(ctx.publication)), "records": float(len(ctx.release))}


@dataclass
class ReferencingParams:
    inner: Any = plugin_ref("metric", "earlier", "the metric this one asks")


class Referencing(Metric):
    """Declares no history of its own but asks a referenced metric that reads it."""

    Params = ReferencingParams
    uses_history = False

    def compute(self, ctx):
        return {f"inner.{k}": v for k, v in self.params.inner.compute(ctx).items()}


class WronglyDeclared(Metric):
    uses_history = False

    def compute(self, ctx):
        return {"wrong": float(len(ctx.history.publications))}


# ------------------------------------------------------------------------------- the run24 case
def test_the_run24_configuration_keeps_no_history_and_gives_the_former_numbers():
    cfg = run24_config(3000, 5)
    counts = []

    def count(t, row):  # what is alive once release t is done: only release t's own objects
        counts.append((live(Release), live(Publication), live(PublicView)))

    comp = runner.build(cfg)
    live = Alive(comp)
    lean = runner.run_releases(cfg, comp, on_release=count, progress=False)
    assert counts == [(1, 1, 1)] * 5
    assert not comp.attackers["intersection"].uses_past_views and not comp.attackers["snapshot"].uses_past_views
    del comp  # its snapshot attacker caches the last population (a Release)

    counts.clear()
    comp = keep_everything(runner.build(cfg))
    live = Alive(comp)
    former = runner.run_releases(cfg, comp, on_release=count, progress=False)
    assert counts == [(t, t, t) for t in range(1, 6)]  # the former runner kept every release
    assert deterministic(lean).equals(deterministic(former))
    assert lean["intersection.narrowed"].iloc[1:].gt(0).any()  # the attack over releases did work


def test_history_is_kept_when_one_component_reads_it_and_every_number_stays_the_same():
    cfg = config("dataset.releases=4", "attacker=intersection", "+extra_attackers.snapshot={name:snapshot}")
    lean_comp = runner.build(cfg)
    assert not lean_comp.attackers["intersection"].uses_past_views
    lean = runner.run_releases(cfg, lean_comp, progress=False)

    comp = runner.build(cfg)
    comp.metrics["earlier"] = EarlierPublished()  # default uses_history = True: the run keeps the history
    comp.metrics["published"] = PublishedSize()
    counts = []
    live = Alive(comp)
    table = runner.run_releases(cfg, comp, on_release=lambda t, row: counts.append(live(Publication)), progress=False)
    assert counts == [1, 2, 3, 4]
    added = ["earlier_published", "earlier_records", "earlier_count", "published", "records"]
    assert deterministic(table.drop(columns=added)).equals(deterministic(lean))
    before = np.concatenate([[0.0], np.cumsum(table["published"].to_numpy())[:-1]])
    assert np.array_equal(table["earlier_published"].to_numpy(), before) and before[-1] > 1000
    assert np.array_equal(table["earlier_records"].to_numpy(), np.concatenate([[0.0], np.cumsum(table["records"])[:-1]]))
    assert np.array_equal(table["earlier_count"].to_numpy(), np.arange(4.0))


@pytest.mark.parametrize("where", ["anonymizer", "privacy_model"])
def test_a_history_reader_among_the_anonymizer_or_the_model_keeps_it(where):
    cfg = config("dataset.releases=3")
    comp = runner.build(cfg)
    target = getattr(comp, where)
    seen = []
    if where == "anonymizer":
        publish = target.publish
        target.publish = lambda release, ctx: seen.append(len(ctx.history.publications)) or publish(release, ctx)
    else:
        prepare = target.prepare
        target.prepare = lambda release, ctx: seen.append(len(ctx.history.releases)) or prepare(release, ctx)
    target.uses_history = True
    runner.run_releases(cfg, comp, progress=False)
    assert seen == [0, 1, 2]


def test_a_referenced_plugin_that_reads_the_history_keeps_it():
    """A plugin referenced (``plugin_ref``) by one handed the history counts as a reader."""
    cfg = config("dataset.releases=3")
    comp = runner.build(cfg)
    assert not any(runner._declares(p, "uses_history") for p in runner._history_readers(comp))
    comp.metrics["ref"] = Referencing(ReferencingParams(inner=EarlierPublished()))
    comp.metrics["published"] = PublishedSize()
    table = runner.run_releases(cfg, comp, progress=False)
    assert np.array_equal(table["inner.earlier_count"].to_numpy(), [0.0, 1.0, 2.0])
    assert np.array_equal(table["inner.earlier_published"].to_numpy(),
                          np.concatenate([[0.0], np.cumsum(table["published"].to_numpy())[:-1]]))
    assert runner._declares(object(), "uses_history")  # a component outside the contract is assumed to read it


# ------------------------------------------------------------------------------- wrong declarations
def test_a_metric_that_declares_no_history_but_reads_it_fails_naming_it():
    cfg = config("dataset.releases=2")
    comp = runner.build(cfg)
    comp.metrics["wrong"] = WronglyDeclared()
    with pytest.raises(CdpbenchError, match=r"^metric 'wrong' \(test_lean_history\.WronglyDeclared\) read "
                                            r"history\.publications, but it declares uses_history = False"):
        runner.run_releases(cfg, comp, progress=False)


@pytest.mark.parametrize("where, message", [
    ("anonymizer", r"^anonymizer 'mondrian' \(cdpbench_classic\.anonymizers\.mondrian\.Mondrian\) read history\.releases"),
    ("privacy_model", r"^privacy model 'k_anonymity' \(cdpbench_classic\.privacy_models\.k_anonymity\.KAnonymity\), "
                      r"through ModelContext\.history, read history\.releases"),
])
def test_an_anonymizer_or_model_that_declares_no_history_but_reads_it_fails_naming_it(where, message):
    cfg = config("dataset.releases=2")
    comp = runner.build(cfg)
    target = getattr(comp, where)
    assert target.uses_history is False
    if where == "anonymizer":
        target.publish = lambda release, ctx: ctx.history.releases
    else:
        target.prepare = lambda release, ctx: ctx.history.releases
    with pytest.raises(CdpbenchError, match=message):
        runner.run_releases(cfg, comp, progress=False)


class LooksBack(Attacker):
    """Declares it reads only the latest view, then reads the first one."""

    uses_past_views = False

    def observe(self, view, ctx):
        assert ctx.views[-1] is view and ctx.views[len(ctx.views) - 1] is view
        return self.inner.observe(view, ctx) if ctx.views[0] is view else None


def test_an_attacker_that_declares_no_past_views_but_reads_one_fails_naming_it():
    cfg = config("dataset.releases=3")
    comp = runner.build(cfg)
    attacker = LooksBack()
    attacker.inner = comp.attackers["snapshot"]
    comp.attackers["snapshot"] = attacker
    with pytest.raises(CdpbenchError, match=r"^attacker 'snapshot' \(test_lean_history\.LooksBack\) read the earlier "
                                            r"view ctx\.views\[0\], but it declares uses_past_views = False"):
        runner.run_releases(cfg, comp, progress=False)


def test_an_attacker_reading_past_views_gets_every_one():
    cfg = config("dataset.releases=3")
    comp = runner.build(cfg)
    snapshot = comp.attackers["snapshot"]
    seen = []

    class Reader(Attacker):  # uses_past_views: the default True
        def observe(self, view, ctx):
            seen.append([v.t for v in ctx.views])
            return snapshot.observe(view, ctx)

    comp.attackers["snapshot"] = Reader()
    runner.run_releases(cfg, comp, progress=False)
    assert seen == [[1], [1, 2], [1, 2, 3]]


# ------------------------------------------------------------------------------- the two guards
def test_unkept_history_counts_releases_and_refuses_its_contents():
    h = UnkeptHistory()
    reader = h.read_by("metric 'x'")
    assert len(h) == 0 and len(reader) == 0
    h.advance()
    h.advance()
    assert len(reader) == 2 and isinstance(reader, History)
    for what in ("releases", "publications"):
        with pytest.raises(CdpbenchError, match=rf"^metric 'x' read history\.{what}, but it declares uses_history = False"):
            getattr(reader, what)
    assert "2 releases, not kept" in repr(reader)


def test_latest_view_only_gives_the_latest_and_refuses_the_earlier_ones():
    latest = object()
    one = LatestViewOnly(latest, 1, "attacker 'a'")
    assert len(one) == 1 and one[0] is latest and one[-1] is latest and list(one) == [latest] and one[:-1] == []
    three = LatestViewOnly(latest, 3, "attacker 'a'")
    assert len(three) == 3 and three[2] is latest and three[-1] is latest and three[2:] == [latest]
    for index in (0, 1, -2, -3):
        with pytest.raises(CdpbenchError, match=rf"^attacker 'a' read the earlier view ctx\.views\[{index}\]"):
            three[index]
    with pytest.raises(CdpbenchError):
        three[:-1]
    with pytest.raises(CdpbenchError):
        list(three)
    with pytest.raises(IndexError):
        three[3]
    with pytest.raises(IndexError):
        three[-4]
