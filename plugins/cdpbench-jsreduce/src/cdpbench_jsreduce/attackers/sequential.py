"""The sequential background-knowledge attack (JS-reduce, TDSC 2012, §4.5, Fig. 1).

The adversary knows the population of each release (every respondent with the exact QI, e.g.
"people that performed an exam during week i" with their age, gender, weight) and observes the
public views one after the other. Per view (Fig. 1):

1. beliefs for the view's candidate respondents from its knowledge: BK_sv for a respondent not
   seen before, RBK^sv (§5.3, revised from its stored posteriors and BK_seq) otherwise;
2. posterior knowledge PK^sv inside every QI-group from those beliefs with the estimator plugin
   ``estimator`` (a plugin reference, ``attacker.estimator=omega``; default ``configuration``,
   the exact configuration posterior of §5.2; ``omega`` is the Ω-estimate the paper's experiments
   used);
3. revision: the posteriors are stored for the next view.

Knowledge (``knowledge``: this package's own knowledge plugins, built here with the attacker's
``steps``, ``normalized``, ``unseen`` and ``corpus_*``): ``dk`` — the data set's exact n-step
BK_seq (DK-BK_seq, ``steps`` past values); ``spm`` — BK_seq mined by Algorithm 5 from an external
corpus the model generates (``corpus_views`` × ``corpus_tuples``, ``corpus_seed``); ``bksv`` — BK_sv only and nothing
revised: the *snapshot* attack, every view on its own (the ``dk`` knowledge whose revision is
never called, so its BK_sv comes from the data set's model). ``ie`` — BK_seq mined from the
ORIGINAL views (§5.1 says an adversary cannot observe them); it is allowed only as the reference
adversary of the paper's Fig. 5a ("the adversary gain with incrementally extracted knowledge"),
and it is the one knowledge that reads ``population.sensitive``.

The estimator matters: the configuration posterior (§5.2) sums confidence degrees, which damps
certainty — even a one-hot correct prior gives p = 2/n in a group of n distinct values — while the
Ω-estimate (``attacker.estimator=omega``, what the paper's experiments used) lets beliefs sharpen
release after release (see test_attacker_sequential.py).

Except with ``ie``, the attacker never reads ``population.sensitive``: its knowledge receives a
copy of the population restricted to the view's respondents with the sensitive column zeroed. Tuples whose
respondent is not in the population (counterfeits, id -1) get a uniform prior and are not
revised. Any anonymizer's publications can be attacked: only the public view is used.

Result: one posterior row per entry of ``view.respondent`` (the core's gain ρ and confidence
metrics read it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import PublicView, Release, rows_of
from cdpbench.errors import require
from cdpbench.plugin import AttackContext, Attacker, AttackResult, Estimator, plugin_ref

from ..knowledge.dk import DomainKnowledge
from ..knowledge.ie import IncrementalKnowledge
from ..knowledge.spm import MinedKnowledge
from ..sequential_knowledge import UNSEEN, SequentialKnowledge, check_corpus

KNOWLEDGE = ("dk", "spm", "ie", "bksv")
#: the knowledge class of each ``knowledge`` value (``bksv``: ``dk`` whose revision is never called)
KNOWLEDGE_CLASSES: dict[str, type[SequentialKnowledge]] = {"dk": DomainKnowledge, "spm": MinedKnowledge, "ie": IncrementalKnowledge}


@dataclass
class SequentialAttackerParams:
    knowledge: str = field(
        default="dk",
        metadata={"help": "adversary's knowledge: 'dk' (exact n-step BK_seq), 'spm' (mined from a corpus), 'bksv' "
                  "(snapshot: BK_sv only), 'ie' (mined from the original views: an oracle, for Fig. 5a only)"},
    )
    steps: int = field(default=3, metadata={"help": "past values BK_seq conditions on (1, 2 or 3)"})
    corpus_views: int = field(default=24, metadata={"help": "spm: views in the external corpus (>= 1)"})
    corpus_tuples: int = field(default=5000, metadata={"help": "spm: approximate tuples per corpus view (>= 1)"})
    corpus_seed: int = field(default=12345, metadata={"help": "spm: seed of the corpus"})
    estimator: Any = plugin_ref(
        "estimator", "configuration",
        "estimator computing PK^sv in each group (§5.2): 'configuration' (the configuration posterior) or 'omega' "
        "(the Omega-estimate of the paper's experiments), with its own parameters (attacker.estimator.<param>)",
    )
    normalized: bool = field(default=True, metadata={"help": "normalize revised beliefs RBK to sum 1 (false: raw)"})
    unseen: str = field(default="zero", metadata={"help": "BK_seq rows of unseen/impossible histories: 'zero' "
                                                  "(Algorithm 5) or 'backoff' (not in the paper)"})

    def __post_init__(self) -> None:
        require(self.knowledge in KNOWLEDGE, "knowledge", "one of 'dk', 'spm', 'ie', 'bksv'", self.knowledge)
        require(
            isinstance(self.steps, int) and not isinstance(self.steps, bool) and self.steps in (1, 2, 3),
            "steps",
            "1, 2 or 3",
            self.steps,
        )
        check_corpus(self)
        require(isinstance(self.normalized, bool), "normalized", "true or false", self.normalized)
        require(self.unseen in UNSEEN, "unseen", "'zero' or 'backoff'", self.unseen)
        # estimator: a plugin reference, validated and built by the core (not seen here)


class SequentialAttacker(Attacker):
    """Sequential attack (Fig. 1): BK_sv/RBK^sv beliefs, PK^sv per group, revision after each view."""

    uses_past_views = False  # reads only ctx.views[-1]: its knowledge revises its own beliefs after each view (issue #28: the run keeps no more than it needs)

    Params = SequentialAttackerParams

    def __init__(self, params: SequentialAttackerParams | None = None):
        super().__init__(params)
        p = self.params
        values: dict[str, Any] = {"steps": p.steps, "normalized": p.normalized, "unseen": p.unseen}
        name = "dk" if p.knowledge == "bksv" else p.knowledge
        if name == "spm":
            values.update(corpus_views=p.corpus_views, corpus_tuples=p.corpus_tuples, corpus_seed=p.corpus_seed)
        cls = KNOWLEDGE_CLASSES[name]
        self.knowledge: SequentialKnowledge = cls(cls.Params(**values))
        self.estimator: Estimator = p.estimator  # built by the core from attacker.estimator
        self.revises = p.knowledge != "bksv"

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        view.require_single_partition("attacker sequential (its estimator reads a QI group's values)")
        m = view.schema.sensitive.size
        respondent = np.asarray(view.respondent, dtype=np.int64)
        population = ctx.population
        rows, found = rows_of(population.respondent, respondent)
        # what the adversary knows of the view's respondents: ids and exact QIs, no sensitive values
        # (but for the oracle 'ie' adversary, which mines the original views)
        oracle = self.params.knowledge == "ie"
        known = Release(
            t=view.t,
            schema=population.schema,
            respondent=respondent[found],
            qi=population.qi[rows[found]],
            sensitive=population.sensitive[rows[found]] if oracle else np.zeros(int(found.sum()), dtype=np.int64),
            truth=population.truth,
        )
        weights = np.full((len(respondent), m), 1.0 / m)
        weights[found] = self.knowledge.prior(known)
        posterior = np.asarray(self.estimator.posterior(weights, view.sensitive, view.group, view.n_groups, m), dtype=float)
        if self.revises:
            revised = np.where(found, respondent, -1)  # counterfeits / unknown ids are not revised
            self.knowledge.revise(view, posterior, revised)
        return AttackResult(respondent=respondent.copy(), posterior=posterior)
