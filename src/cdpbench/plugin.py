"""The plugin contract: one base class per entry-point group (DESIGN.md §2).

A plugin is a class registered under an entry point of its group; its ``Params`` class attribute
is a dataclass of typed parameters with defaults, validated in ``__post_init__`` (raise
:class:`~cdpbench.errors.ConfigError` via :func:`~cdpbench.errors.require`). The core registers
every discovered ``Params`` into Hydra's ConfigStore, so ``anonymizer=mondrian anonymizer.k=5``
works with no YAML written by the plugin author. Plugins are instantiated per run with
``Plugin(params)``; keep state on the instance, never in module globals (joblib reuses workers).

Every hot-path method works on whole arrays of groups at once: a privacy model's ``accepts``
judges a batch of candidate groups, an estimator computes posteriors for every group of a
publication in one call.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any, Callable, ClassVar, Iterator

import numpy as np

from .data import GroupBatch, History, Publication, PublicView, Release
from .errors import CdpbenchError
from .kinds import ENTRY_POINT_GROUPS, GROUP_KINDS  # noqa: F401 - re-exported: the plugin contract's
from .schema import Schema


@dataclass
class NoParams:
    """For plugins without parameters."""


#: the metadata key that marks a ``Params`` field as a reference to another plugin
PLUGIN_REF = "cdpbench.plugin_ref"


def plugin_ref(kind: str, default: str, help: str = "") -> Any:
    """A ``Params`` field that names another plugin of ``kind`` (default: plugin ``default``), e.g.
    an attacker's estimator or an anonymizer's base algorithm.

    In a config it is a sub-node, ``{name: <plugin>, <its parameters>}``: ``attacker.estimator=
    permanent attacker.estimator.max_states=5000`` on the command line (``attacker/estimator=...``
    is the same), ``estimator: permanent`` or ``estimator: {name: permanent, max_states: 5000}`` in
    a preset. The core validates it (errors name the nested path), creates the plugin with the
    registry the run is built with, and puts the *instance* in the field; its parameters are
    logged to MLflow like any other (``attacker.estimator.max_states``). A plugin never looks a
    plugin up by name itself.

    ``__post_init__`` sees the default name, not the instance; a check that needs the built
    plugin goes in a ``check_references(self)`` method of the ``Params``, which the registry
    calls once the references are built (its errors name the field relative to the plugin,
    ``require("closeness.k", ...)``, and the registry prefixes the plugin's own path)."""
    return field(default=default, metadata={"help": help, PLUGIN_REF: kind})


def plugin_refs(params_cls: type) -> dict[str, tuple[str, str]]:
    """``{field: (kind, default plugin name)}`` for the fields of ``params_cls`` made with
    :func:`plugin_ref`."""
    if not dataclasses.is_dataclass(params_cls):
        return {}
    return {f.name: (f.metadata[PLUGIN_REF], f.default) for f in dataclasses.fields(params_cls) if PLUGIN_REF in f.metadata}


class Plugin:
    """Base of every plugin. Subclasses set ``Params`` and a one-line class docstring."""

    Params: ClassVar[type] = NoParams

    def __init__(self, params: Any | None = None):
        self.params = params if params is not None else self.Params()
        for name in plugin_refs(type(self.params)):
            if not isinstance(getattr(self.params, name), Plugin):
                raise TypeError(f"{type(self).__name__}: params.{name} is {getattr(self.params, name)!r}, not a plugin; "
                                f"plugins that reference others are created with Registry.create, which builds them")


# ---------------------------------------------------------------------------- lean history
class UnkeptHistory(History):
    """The history handed to a component when no component of the run reads it (every one
    declares ``uses_history = False``): the run keeps no release or publication (issue #28: at
    10^6 records a release each kept release costs about 140 MB). ``len()`` still counts the
    releases so far; reading ``releases`` or ``publications`` raises a
    :class:`~cdpbench.errors.CdpbenchError` naming the reader, so a wrong declaration fails
    loudly instead of answering from an empty history."""

    def __init__(self, reader: str = "a component", released: list[int] | None = None):
        self._reader = reader
        self._released = released if released is not None else [0]  # shared by every reader's copy

    def read_by(self, reader: str) -> "UnkeptHistory":
        """The same (unkept) history, naming ``reader`` in its error."""
        return UnkeptHistory(reader, self._released)

    def advance(self) -> None:
        """One more release done (what ``History.releases.append`` counts when kept)."""
        self._released[0] += 1

    def _refuse(self, what: str):
        raise CdpbenchError(
            f"{self._reader} read history.{what}, but it declares uses_history = False and so does every other "
            f"component of this run, so the run keeps no history; a component that reads ctx.history must "
            f"declare uses_history = True (the default)"
        )

    releases = property(lambda self: self._refuse("releases"))  # type: ignore[assignment]
    publications = property(lambda self: self._refuse("publications"))  # type: ignore[assignment]

    def __len__(self) -> int:
        return self._released[0]

    def __repr__(self) -> str:
        return f"UnkeptHistory({self._released[0]} releases, not kept)"

    __eq__ = object.__eq__
    __hash__ = object.__hash__


class LatestViewOnly(Sequence):
    """``AttackContext.views`` of an attacker that declares ``uses_past_views = False``: the views
    so far, of which only the latest (``views[-1]``) is kept. ``len()`` counts every view so far;
    reading an earlier one raises a :class:`~cdpbench.errors.CdpbenchError` naming the attacker."""

    def __init__(self, latest: PublicView, count: int, reader: str = "an attacker"):
        self._latest, self._count, self._reader = latest, count, reader

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        i = index + self._count if index < 0 else index
        if i == self._count - 1:
            return self._latest
        if not 0 <= i < self._count:
            raise IndexError(f"view index {index} out of range ({self._count} views)")
        raise CdpbenchError(
            f"{self._reader} read the earlier view ctx.views[{index}], but it declares uses_past_views = False, so the "
            f"run keeps only its latest view; an attacker that reads earlier views must declare "
            f"uses_past_views = True (the default)"
        )


# ---------------------------------------------------------------------------- contexts
@dataclass
class ModelContext:
    """What a privacy model may look at besides the candidate groups."""

    schema: Schema
    table_distribution: np.ndarray  # [m] sensitive distribution of the whole release
    history: History = field(default_factory=History)
    release: Release | None = None
    prior: np.ndarray | None = None  # [n, m] per-record prior aligned with release rows

    def prior_for(self, publication: Publication) -> np.ndarray | None:
        """The prior rows of a publication's (non-counterfeit) records."""
        if self.prior is None:
            return None
        return self.prior[np.maximum(publication.row, 0)]


@dataclass
class VerifyReport:
    """Outcome of verifying a whole publication: ``violations`` = groups failing the model."""

    satisfied: bool
    violations: int
    levels: dict[str, float] = field(default_factory=dict)


@dataclass
class PublishContext:
    privacy_model: "PrivacyModel"
    model_context: ModelContext
    history: History
    rng: np.random.Generator
    prior: np.ndarray | None = None  # [n, m] defender beliefs per record, if the anonymizer asks

    def predicate(self, release: Release) -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
        """The privacy model as a predicate on candidate groups of ``release``:
        ``accepts(rows, segment, n_groups)`` judges the groups in which record ``rows[i]`` is in
        candidate group ``segment[i]``, with the defender's beliefs (``model_context.prior``)
        riding along in the batch, and the records' exact QIs (``GroupBatch.qi``) when the model
        declares ``needs_qi``. Greedy anonymizers call it once per batch of candidates."""
        model, mctx = self.privacy_model, self.model_context
        prior, sensitive, n_values = mctx.prior, release.sensitive, release.n_values
        qi = release.qi if getattr(model, "needs_qi", False) else None  # exact QIs, only for a model that reads them

        def accepts(rows: np.ndarray, segment: np.ndarray, n_groups: int) -> np.ndarray:
            batch = GroupBatch(sensitive[rows], segment, n_groups, n_values, None if prior is None else prior[rows],
                               None if qi is None else qi[rows])
            return np.asarray(model.accepts(batch, mctx), dtype=bool)

        return accepts

    def extension(self, release: Release) -> "Callable[[np.ndarray, np.ndarray, int], GroupExtension | None] | None":
        """The privacy model's optional fast path for growing groups one record at a time (see
        :meth:`PrivacyModel.extension`) as ``start(rows, segment, n_groups)``, or ``None`` when the
        model has none. Judges exactly what :meth:`predicate` would, with the same context."""
        model, mctx = self.privacy_model, self.model_context
        if type(model).extension is PrivacyModel.extension:
            return None

        def start(rows: np.ndarray, segment: np.ndarray, n_groups: int) -> "GroupExtension | None":
            return model.extension(release, mctx, rows, segment, n_groups)

        return start


class GroupExtension:
    """Running per-group statistics of a fixed list of groups, able to judge "each group plus one
    more record" for all groups at once (a privacy model's optional fast path, see
    :meth:`PrivacyModel.extension`). ``accepts_plus(row)`` must equal what ``accepts`` answers for
    the batch of every group with record ``row`` appended (bit for bit: same float operations in
    the same order); ``add(g, row)`` appends ``row`` to group ``g`` for good."""

    def accepts_plus(self, row: int) -> np.ndarray:
        raise NotImplementedError

    def add(self, g: int, row: int) -> None:
        raise NotImplementedError

    def accepts_plus_among(self, row: int, groups: np.ndarray) -> np.ndarray:
        """``accepts_plus(row)[groups]``: only the listed groups judged (bit for bit the same
        answers). Default: all judged, then picked; an extension may judge only those."""
        return np.asarray(self.accepts_plus(row), dtype=bool)[np.asarray(groups, dtype=np.int64)]

    def accepts_prefixes(self, rows: np.ndarray) -> np.ndarray | None:
        """Optional: ``[B, L]`` bool, entry ``[b, l]`` = what ``accepts`` answers for the group of
        records ``rows[b, :l + 1]`` (in that order; independent of this extension's own groups),
        bit for bit as ``accepts`` computes it. ``rows`` is an int ``[B, L]`` array (``B`` may be 0).
        Default ``None``: not offered (the caller asks ``accepts``); an extension answers ``None``
        either for every call or for none."""
        return None


def nearest_accepted(
    ext: GroupExtension, row: int, distance: np.ndarray, *, block: int, later_on_ties: bool = False, stats: dict | None = None
) -> int:
    """The group an anonymizer places leftover ``row`` in: the nearest group (``distance``, one
    per group) whose running statistics accept it, ties to the lower group index (or the later
    one, ``later_on_ties``); -1 when none does. The groups are judged nearest first, in blocks
    (``ext.accepts_plus_among``): the ``block`` nearest remaining groups with every group tied at
    the block's bound, then four times more each time. Every group of a block comes, in that
    order, before every group after it, so the first accepted group of the first block holding
    one is the answer that judging all groups at once and taking the nearest gives. Each block
    adds one to ``stats["accepts_calls"]``."""
    distance = np.asarray(distance)
    remaining = np.arange(len(distance))
    while len(remaining):
        if len(remaining) > block:
            left = distance[remaining]
            bound = np.partition(left, block - 1)[block - 1]
            near = left <= bound  # every group at the bound: ties stay together
            asked, remaining = remaining[near], remaining[~near]
        else:
            asked, remaining = remaining, remaining[:0]
        asked = asked[np.lexsort((-asked if later_on_ties else asked, distance[asked]))]  # nearest first
        if stats is not None:
            stats["accepts_calls"] += 1
        ok = np.asarray(ext.accepts_plus_among(row, asked), dtype=bool)
        if ok.any():
            return int(asked[np.argmax(ok)])
        block *= 4
    return -1


@dataclass
class AttackContext:
    """What an adversary knows: the population of the release (respondents with their exact QI,
    e.g. from a voter list — the table ``population.sensitive`` must NOT be read), the public views
    so far and a seeded generator."""

    population: Release
    views: list[PublicView]
    rng: np.random.Generator

    @property
    def schema(self) -> Schema:
        return self.population.schema


@dataclass
class AttackResult:
    """Posterior beliefs ``[n, m]`` of the adversary for each respondent in ``respondent``
    (the respondents of the published records); ``extra`` holds any numbers of its own."""

    respondent: np.ndarray
    posterior: np.ndarray | None = None
    extra: dict[str, float] = field(default_factory=dict)
    #: optional bool per entry of ``respondent``: the adversary was GIVEN that respondent's value
    #: (e.g. a compromised record); belief metrics then also report over the others only
    given: np.ndarray | None = None


@dataclass
class MetricContext:
    release: Release
    publication: Publication
    attacks: dict[str, AttackResult]
    report: VerifyReport | None
    rng: np.random.Generator
    timings: dict[str, float] = field(default_factory=dict)
    history: History = field(default_factory=History)


# ---------------------------------------------------------------------------- plugin kinds
class Dataset(Plugin):
    """Yields the raw releases of a scenario (``cdpbench.datasets``)."""

    scenario: ClassVar[str] = "continuous"  # or "cumulative", "sequential"
    #: every release carries the public population its respondents are drawn from
    #: (``Release.population``), which the privacy models that declare ``needs_population`` read
    publishes_population: ClassVar[bool] = False

    def releases(self, rng: np.random.Generator) -> Iterator[Release]:
        raise NotImplementedError

    def check(self) -> None:
        """Validate every input the data set reads (files, schemas) before any run is created.

        Called by the CLI for every job of a sweep before anything is launched; raise
        :class:`~cdpbench.errors.DataError` with a one-line message naming the field. Default:
        nothing to check (generated data sets validate their parameters in ``Params``).
        """

    def input_files(self) -> list:
        """The files this data set reads (release files, schemas, hierarchies) as paths, in a
        fixed order: their fingerprint is recorded on every run, and a resumed sweep runs again a
        job whose files changed (:mod:`cdpbench.provenance`). Default: none — a generated data
        set, or one read from its own package's files, which the package's code fingerprint
        covers."""
        return []


class Knowledge(Plugin):
    """Background knowledge (``cdpbench.knowledge``).

    ``prior(release)``: beliefs ``[n, m]`` over the sensitive domain for every record of the
    release (rows aligned with the release), given its QI (BK_sv) and, for sequential knowledge,
    revised by what was learnt from earlier releases (RBK_sv). An attacker's knowledge must not
    read ``release.sensitive`` unless it models a defender (IE knowledge).

    ``revise(view, posterior, respondent)``: after a release, the posterior beliefs ``[p, m]``
    (rows aligned with ``respondent``) computed on that release; ``posterior`` may be ``None``
    when no estimator is configured. Default: no-op (BK_sv-only knowledge).
    """

    def prior(self, release: Release) -> np.ndarray:
        raise NotImplementedError

    def revise(self, view: PublicView, posterior: np.ndarray | None, respondent: np.ndarray) -> None:
        """Update internal state after a release (sequential knowledge); default: no-op."""


class Estimator(Plugin):
    """Posterior beliefs inside QI-groups from per-record prior weights (``cdpbench.estimators``).

    ``posterior(weights, sensitive, segment, n_groups)``: row ``i`` is a respondent of group
    ``segment[i]``; the group's published sensitive multiset is ``sensitive[segment == g]``;
    ``weights[i]`` is that respondent's prior over the domain. Returns ``[n, m]`` rows summing to 1.
    """

    def posterior(self, weights: np.ndarray | None, sensitive: np.ndarray, segment: np.ndarray, n_groups: int, n_values: int) -> np.ndarray:
        raise NotImplementedError


#: what ``reads_counts`` says, for the three kinds that read a publication
READS_COUNTS_HELP = """the component can read a *counted* publication (``Publication.noisy_counts``:
    noisy counts per grid cell and no records, issue #29). False by default: a run whose anonymizer
    declares ``publishes = "counts"`` refuses, when it is built, every privacy model, attacker and
    metric that does not declare True (its records, ``PublicView.sensitive`` and the group
    counts, are not published)."""


class PrivacyModel(Plugin):
    """A predicate on candidate groups and a verifier of whole publications
    (``cdpbench.privacy_models``). ``needs_prior``: the model reads per-record beliefs
    (``GroupBatch.prior``), from the defender's knowledge or set by its own ``prepare``.
    ``needs_qi``: the model reads the candidate records' exact QIs (``GroupBatch.qi``), e.g. to
    find the box a group would be published with (δ-presence, k-map)."""

    needs_prior: ClassVar[bool] = False
    #: see :data:`READS_COUNTS_HELP`
    reads_counts: ClassVar[bool] = False
    needs_qi: ClassVar[bool] = False
    #: the model compares a publication with the release's public population (δ-presence, k-map):
    #: the run refuses, before it starts, a data set that does not declare ``publishes_population``
    needs_population: ClassVar[bool] = False
    #: the component reads ``ctx.history`` (earlier releases and publications). True by default,
    #: which is safe: the run then keeps every release and publication. A component that never
    #: reads it declares False; when every component of a run (and every plugin they reference)
    #: declares False, the run keeps none and hands out an :class:`UnkeptHistory`, which raises
    #: if read.
    uses_history: ClassVar[bool] = True

    def prepare(self, release: Release, ctx: ModelContext) -> None:
        """Called once per release before anonymization; a model that needs per-record beliefs
        (e.g. (B,t)-privacy's kernel prior) sets ``ctx.prior`` here. Default: nothing."""

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        """``[n_groups]`` bool: which candidate groups satisfy the model."""
        raise NotImplementedError

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        """The model's achieved level(s) on a publication (e.g. ``{"k": 7}``)."""
        return {}

    def extension(
        self, release: Release, ctx: ModelContext, rows: np.ndarray, segment: np.ndarray, n_groups: int
    ) -> GroupExtension | None:
        """Optional fast path: a :class:`GroupExtension` over the groups of ``release`` given like
        ``accepts`` takes them (record ``rows[i]`` in group ``segment[i]``, each group's records in
        order), or ``None`` when the model offers none (the caller then asks ``accepts``).
        Default: ``None``."""
        return None

    def accepts_publication(self, publication: Publication, ctx: ModelContext) -> bool | None:
        """Optional: judge a whole candidate publication, e.g. against the earlier releases in
        ``ctx.history`` (what ``accepts`` cannot see: it judges groups without their boxes or the
        history). Anonymizers that build whole candidate publications (top-down specialization)
        ask it about each one. Default ``None``: not offered."""
        return None

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        batch = publication.batch(ctx.prior_for(publication))
        ok = self.accepts(batch, ctx) if publication.n_groups else np.ones(0, bool)
        bad = int((~ok).sum())
        return VerifyReport(bad == 0, bad, self.levels(publication, ctx))


class Anonymizer(Plugin):
    """Publishes one release given history and defender beliefs (``cdpbench.anonymizers``)."""

    needs_prior: ClassVar[bool] = False
    #: what the publications hold: ``"records"`` (default: published records in groups) or
    #: ``"counts"`` (``Publication.noisy_counts``, no records: only components that declare
    #: ``reads_counts = True`` may then be in the run, :data:`READS_COUNTS_HELP`)
    publishes: ClassVar[str] = "records"
    #: the component reads ``ctx.history`` (earlier releases and publications). True by default,
    #: which is safe: the run then keeps every release and publication. A component that never
    #: reads it declares False; when every component of a run (and every plugin they reference)
    #: declares False, the run keeps none and hands out an :class:`UnkeptHistory`, which raises
    #: if read.
    uses_history: ClassVar[bool] = True

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        raise NotImplementedError


class Attacker(Plugin):
    """Observes the publications one by one with its own knowledge (``cdpbench.attackers``)."""

    #: the attacker reads earlier views in ``ctx.views`` (not only ``ctx.views[-1]``). True by
    #: default, which is safe: the run keeps every view for it. An attacker that keeps what it
    #: needs of earlier views on its instance, or none, declares False: the run then keeps only the
    #: latest view for it (:class:`LatestViewOnly`, which raises if an earlier one is read).
    uses_past_views: ClassVar[bool] = True
    #: see :data:`READS_COUNTS_HELP`
    reads_counts: ClassVar[bool] = False

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        raise NotImplementedError


class Metric(Plugin):
    """Numbers per release (``cdpbench.metrics``); ``compute`` returns ``{name: value}``."""

    #: see :data:`READS_COUNTS_HELP`
    reads_counts: ClassVar[bool] = False

    #: the component reads ``ctx.history`` (earlier releases and publications). True by default,
    #: which is safe: the run then keeps every release and publication. A component that never
    #: reads it declares False; when every component of a run (and every plugin they reference)
    #: declares False, the run keeps none and hands out an :class:`UnkeptHistory`, which raises
    #: if read.
    uses_history: ClassVar[bool] = True

    def compute(self, ctx: MetricContext) -> dict[str, float]:
        raise NotImplementedError


#: kind -> the base class of its plugins (names and entry-point groups: :mod:`cdpbench.kinds`)
KINDS: dict[str, type[Plugin]] = {"dataset": Dataset, "knowledge": Knowledge, "estimator": Estimator,
                                  "privacy_model": PrivacyModel, "anonymizer": Anonymizer, "attacker": Attacker,
                                  "metric": Metric}
if KINDS.keys() != ENTRY_POINT_GROUPS.keys():  # pragma: no cover - a kind added in one place only
    raise ImportError(f"cdpbench.plugin.KINDS {list(KINDS)} differ from cdpbench.kinds {list(ENTRY_POINT_GROUPS)}")
