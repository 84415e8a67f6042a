"""Which sensitive-value changes the adversary allows between two releases (KSAA §1: her PD_cor
background knowledge, "the correlations between sensitive values", "narrows down cliques
included in a perfect matching").

A link of the linkage graph (:mod:`.linkage_graph`, :mod:`.joint_matching`) joins a record of
value ``a`` in an earlier release to a record of value ``b`` in a later one ``d`` releases on
only when the adversary thinks a respondent can go from ``a`` to ``b`` in ``d`` releases
(``transitions``, the parameter of the linkage attacker and of the three models):

* ``"none"``: values persist (``b = a``), Shmueli et al.'s setting;
* ``"any"``: every change is possible;
* ``"knowledge"`` (PD_cor): the transition probability ``P_d[a, b]`` of a knowledge plugin (the
  plugin reference ``pd_cor``) must exceed ``min_transition`` (0: only impossible transitions
  are removed). ``P_d`` is the knowledge's one-release table (BayFrame's ``PD1_cor``, ``tables``;
  JS-reduce's weekly ``BK_seq``, ``transition_tables``) to the power ``d`` (the hidden releases
  follow the same table), its rows renormalized where positive (conditioned on the respondent
  still being there, as the knowledge composes its tables over gaps). A knowledge whose
  transitions depend on the QI (transition classes, bkseq's age groups) gives one table per
  class; a record's respondent is hidden in its group, so a transition is kept when some class
  present in the release allows it (the largest ``P_d[a, b]`` over those classes).

:class:`TransitionRelation` holds the reading; ``allowed(steps, m)`` is the ``[m, m]`` boolean
matrix of the links kept between two releases ``steps`` apart (``none``: the identity; ``any``:
all true).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import Release
from cdpbench.errors import DataError, require

TRANSITIONS = ("none", "any", "knowledge")
TRANSITIONS_HELP = (
    "which value changes a link allows between releases: 'none' (values persist), 'any' (every change), "
    "'knowledge' (PD_cor, KSAA §1: the transition probability of the pd_cor knowledge over the releases between "
    "the two records, its one-release table to that power, must exceed min_transition)"
)
MIN_TRANSITION_HELP = (
    "transitions=knowledge: a link a -> b is removed when the pd_cor knowledge gives that transition a "
    "probability <= this (0: only impossible transitions removed), in [0, 1)"
)
PD_COR_HELP = (
    "transitions=knowledge: the knowledge plugin whose transition tables are PD_cor (bayframe: PD1_cor; "
    "dk/spm: BK_seq); needs a data set with a transition model (bkseq) unless it has one of its own "
    "(bayframe with pd_cor.correlation=uniform: every transition possible)"
)


@dataclass(frozen=True, eq=False)
class TransitionRelation:
    """The adversary's transitions (module docstring): ``kind`` one of :data:`TRANSITIONS`;
    for ``"knowledge"``, ``tables`` ``[C, m, m]`` (one one-release table per transition class,
    row = earlier value) and ``min_transition``."""

    kind: str = "none"
    tables: np.ndarray | None = None
    min_transition: float = 0.0
    _allowed: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        require(self.kind in TRANSITIONS, "transitions", f"one of {list(TRANSITIONS)}", self.kind)
        if self.kind == "knowledge":
            require(self.tables is not None and np.ndim(self.tables) == 3, "transitions",
                    "'knowledge' with PD_cor tables [classes, m, m] (built from the pd_cor knowledge)", self.kind)

    def probability(self, steps: int) -> np.ndarray:
        """``[m, m]``: the largest over the classes of ``P_steps[a, b]`` (kind ``"knowledge"``)."""
        require(isinstance(steps, (int, np.integer)) and steps >= 1, "steps", "an integer >= 1 (a later release)", steps)
        out = None
        for table in np.asarray(self.tables, dtype=float):
            p = np.linalg.matrix_power(table, int(steps))
            total = p.sum(axis=1, keepdims=True)
            p = np.divide(p, total, out=np.zeros_like(p), where=total > 0)
            out = p if out is None else np.maximum(out, p)
        return out

    def allowed(self, steps: int, m: int) -> np.ndarray:
        """``bool [m, m]``: may a record of value ``a`` be linked to one of value ``b`` published
        ``steps`` releases later?"""
        key = (int(steps), int(m))
        if key not in self._allowed:
            if self.kind == "none":
                out = np.eye(m, dtype=bool)
            elif self.kind == "any":
                out = np.ones((m, m), dtype=bool)
            else:
                p = self.probability(int(steps))
                require(p.shape[0] >= m, "pd_cor", f"transition tables over at least {m} values", p.shape)
                out = p[:m, :m] > self.min_transition
            self._allowed[key] = out
        return self._allowed[key]


def as_relation(transitions: Any) -> TransitionRelation:
    """``transitions`` as a :class:`TransitionRelation` (``"none"`` and ``"any"`` need nothing
    else; ``"knowledge"`` must come built, with its tables: :func:`pd_cor_relation`)."""
    if isinstance(transitions, TransitionRelation):
        return transitions
    require(transitions in ("none", "any"), "transitions",
            "'none', 'any', or 'knowledge' built with its PD_cor tables (the plugins build it from pd_cor)", transitions)
    return TransitionRelation(str(transitions))


def steps_between(view_a, view_b) -> int:
    """Releases from ``view_a`` to the later ``view_b`` (their ``t``)."""
    steps = int(view_b.t) - int(view_a.t)
    require(steps >= 1, "views", "an earlier release before a later one (t increasing)", (view_a.t, view_b.t))
    return steps


def pd_cor_relation(knowledge: Any, release: Release, min_transition: float) -> TransitionRelation:
    """The ``"knowledge"`` relation from a knowledge plugin's one-release transition tables for
    the transition classes of ``release`` (its ``classes``; one class without it). A knowledge
    without tables, or a data set without a transition model, is a one-line error."""
    name = getattr(knowledge, "plugin_name", type(knowledge).__name__)
    if hasattr(knowledge, "tables"):
        first = lambda c: knowledge.tables(release, c)[0]  # noqa: E731  BayFrame's PD1_cor
    elif hasattr(knowledge, "transition_tables"):
        first = lambda c: knowledge.transition_tables(release, c)[0]  # noqa: E731  JS-reduce's weekly BK_seq
    else:
        raise DataError(f"transitions='knowledge': the pd_cor knowledge {name!r} has no transition tables "
                        f"(use pd_cor=bayframe, dk or spm)")
    try:
        classes = _classes(knowledge, release)
        tables = np.stack([np.asarray(first(int(c)), dtype=float) for c in classes])
    except DataError as e:
        raise DataError(f"transitions='knowledge': the data set gives the pd_cor knowledge {name!r} no transition model "
                        f"(adult_sequential has none; bkseq_sequential has one): {e}") from None
    m = release.n_values
    if tables.shape[1:] != (m, m):
        raise DataError(f"transitions='knowledge': the pd_cor knowledge {name!r} gives tables of shape "
                        f"{tables.shape[1:]}, expected {(m, m)}")
    return TransitionRelation("knowledge", tables, float(min_transition))


def _classes(knowledge: Any, release: Release) -> np.ndarray:
    """The transition classes of ``release``'s records (``knowledge.classes``); every class of the
    data set's model when the release's QIs do not give them (bkseq_sequential's first release
    lacks the weight the classes need)."""
    if not hasattr(knowledge, "classes"):
        return np.zeros(1, np.int64)
    try:
        classes = np.unique(np.asarray(knowledge.classes(release), np.int64))
    except (DataError, ValueError, IndexError):
        model = (release.truth or {}).get("model")
        classes = np.arange(int(getattr(model, "n_seq_classes", 1)), dtype=np.int64)
    return classes if len(classes) else np.zeros(1, np.int64)


def check_min_transition(value: Any) -> None:
    require(isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= float(value) < 1.0,
            "min_transition", "a number in [0, 1)", value)


def check_pd_cor(params: Any) -> None:
    """``check_references`` of the plugins with ``transitions``: under ``"knowledge"`` the
    ``pd_cor`` knowledge must have transition tables."""
    if params.transitions == "knowledge":
        k = params.pd_cor
        require(hasattr(k, "tables") or hasattr(k, "transition_tables"), "pd_cor",
                "a knowledge plugin with transition tables (bayframe, dk, spm)", getattr(k, "plugin_name", type(k).__name__))


class RelationOf:
    """The relation a plugin's ``transitions``, ``min_transition`` and ``pd_cor`` give for a
    release, built once per release (the knowledge's tables do not change within one)."""

    def __init__(self, params: Any):
        self.params = params
        self._for: tuple[Any, Any] | None = None

    def __call__(self, release: Release | None, n_views: int):
        """The relation for joining ``n_views`` views, the latest of ``release`` (one view:
        nothing to join, no knowledge asked)."""
        p = self.params
        if p.transitions != "knowledge" or n_views <= 1:
            return p.transitions if p.transitions != "knowledge" else "none"
        require(release is not None, "transitions", "'knowledge' with the current release in the context", p.transitions)
        if self._for is None or self._for[0] is not release:
            self._for = (release, pd_cor_relation(p.pd_cor, release, p.min_transition))
        return self._for[1]
