"""BayFrame's revised prior RPD (§4.3, Eqs. 3–4) on the paper's Example 1/3 data and by hand."""

import re

import numpy as np
import pytest

from cdpbench.data import PublicView, Release
from cdpbench.errors import ConfigError, DataError
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_bayframe.knowledge.bayframe import BayFrameKnowledge, BayFrameKnowledgeParams


def knowledge(**values) -> BayFrameKnowledge:
    """The bayframe knowledge, built by the registry (with its kernel reference)."""
    return default_registry().create("knowledge", "bayframe", values)  # type: ignore[return-value]

# Table 6's domain, in its order
VALUES = ("Flu", "Gastric ulcer", "Bronchitis", "Alzheimer", "Liver infection", "Diabetes-I", "Diabetes-II",
          "GERD", "Depression", "Cancer-I", "Cancer-II")
V = {v: i for i, v in enumerate(VALUES)}
PD_SV = np.array([.12, .05, .05, .10, .05, .13, .12, .10, .14, .09, .05])
# Table 7: PD1_cor(to | from), only three targets (the rows do not sum to 1)
TABLE7 = {
    "Flu": (.005, .001, .0001), "Gastric ulcer": (.3, .01, .001), "Cancer-I": (.002, .1, .6),
    "Bronchitis": (.002, .003, .002), "Alzheimer": (.002, .1, .002), "Diabetes-I": (.005, .001, .0001),
}
SCHEMA = Schema((NumericQI("age", 0, 100),), Sensitive("disease", VALUES))


class ExampleModel:
    """The paper's Example 1 knowledge as a ground-truth model: PD_sv of Table 6, PD1_cor of Table 7."""

    values = VALUES
    max_order = 1

    def __init__(self, two_step: np.ndarray | None = None):
        m = len(VALUES)
        self.t1 = np.zeros((m, m))
        for frm, row in TABLE7.items():
            self.t1[V[frm], [V["GERD"], V["Depression"], V["Cancer-II"]]] = row
        self.t2 = two_step

    def bk_sv(self, qi, t=None):
        return np.tile(PD_SV, (len(qi), 1))

    def bk_seq(self, steps):
        return self.t1 if steps == 1 else self.t2


def release(t, ids, model, sensitive=None):
    ids = np.asarray(ids, dtype=np.int64)
    return Release(t, SCHEMA, ids, np.full((len(ids), 1), 66.0),
                   np.zeros(len(ids), dtype=np.int64) if sensitive is None else np.asarray(sensitive), truth={"model": model})


def view(t, groups):
    """A public view: ``groups`` = [(respondents, values)]."""
    group = np.concatenate([np.full(len(r), g) for g, (r, _) in enumerate(groups)])
    resp = np.concatenate([np.asarray(r) for r, _ in groups])
    sens = np.concatenate([np.sort([V[v] for v in vals]) for _, vals in groups])
    G = len(groups)
    return PublicView(t, SCHEMA, group, resp, sens, np.zeros((G, 1)), np.zeros((G, 1)), {}, 0)


ALICE, BETH, CAYLA, DIOR, ELISA, FIONA, GANYA, HARRIET = range(8)
GROUP1 = ([ALICE, BETH, CAYLA], ["Bronchitis", "Alzheimer", "Cancer-I"])
GROUP2 = ([DIOR, ELISA, FIONA], ["Gastric ulcer", "Flu", "Diabetes-I"])


def table8_posterior(v):
    """Table 8: PB = 1/3 on each value of the respondent's group at t1."""
    post = np.zeros((len(v.respondent), len(VALUES)))
    for i, g in enumerate(v.group):
        vals = v.sensitive[v.group == g]
        post[i, vals] = 1.0 / len(vals)
    return post


def test_new_respondents_get_pd_sv():
    k = knowledge()
    model = ExampleModel()
    prior = k.prior(release(1, range(6), model))
    assert prior == pytest.approx(np.tile(PD_SV, (6, 1)))


def test_example_3_revised_prior_is_table_9():
    """Eq. 3 with d = 1: RPD(Cayla, Cancer-II) = (0.002 + 0.002 + 0.6) / 3 = 0.20133 before normalizing;
    over the full domain the row holds only Table 7's three targets, so normalized it is Table 9."""
    model = ExampleModel()
    k = knowledge()
    r1 = release(1, range(6), model)
    k.prior(r1)
    v1 = view(1, [GROUP1, GROUP2])
    k.revise(v1, table8_posterior(v1), v1.respondent)
    rpd = k.prior(release(2, [CAYLA, DIOR, ELISA, FIONA, GANYA, HARRIET], model))
    cols = [V["Cancer-II"], V["GERD"], V["Depression"]]
    raw_cayla = np.array([0.604, 0.006, 0.203]) / 3
    raw_dior = np.array([0.0012, 0.31, 0.012]) / 3
    assert raw_cayla[0] == pytest.approx(0.20133, abs=5e-6)
    assert rpd[0, cols] == pytest.approx(raw_cayla / raw_cayla.sum(), rel=1e-12)
    assert rpd[0, cols] == pytest.approx([0.74293, 0.00738, 0.24969], abs=5e-6)
    assert rpd[1, cols] == pytest.approx(raw_dior / raw_dior.sum(), rel=1e-12)
    assert rpd[2, cols] == pytest.approx([0.00371, 0.95916, 0.03713], abs=5e-6)
    assert rpd[:3].sum(axis=1) == pytest.approx(1.0)
    # Ganya and Harriet are new: PD_sv
    assert rpd[4:] == pytest.approx(np.tile(PD_SV, (2, 1)))


def _absent_history(k, model):
    """t1: both groups published; t2: Cayla, Dior, Elisa published; t3: Alice (absent from t2) and
    Cayla are in the release; t4: Cayla (in release 3 but not published there) and Dior (last
    published at t2)."""
    k.prior(release(1, range(6), model))
    v1 = view(1, [GROUP1, GROUP2])
    k.revise(v1, table8_posterior(v1), v1.respondent)
    rpd2 = k.prior(release(2, [CAYLA, DIOR, ELISA], model))
    v2 = view(2, [([CAYLA, DIOR, ELISA], ["Cancer-II", "GERD", "Depression"])])
    k.revise(v2, table8_posterior(v2), v2.respondent)
    rpd3 = k.prior(release(3, [ALICE, CAYLA], model))
    rpd4 = k.prior(release(4, [CAYLA, DIOR], model))
    return rpd2, rpd3, rpd4


def test_absent_respondent_gets_the_rpd_computed_after_its_last_publication():
    """§4.3/§5 (the default, absent=revised): "the last computed RPD" of a respondent absent from
    the previous release is Eq. 3 on its last posterior, as computed right after that publication."""
    model = ExampleModel()
    rpd2, rpd3, rpd4 = _absent_history(knowledge(), model)
    # t3: Alice was last published at t1, in Cayla's t1 group with the same posterior (Table 8):
    # her RPD is Cayla's at t2, Table 9 (Example 3), not PD_sv
    assert rpd3[0] == pytest.approx(rpd2[0], rel=1e-12)
    assert not np.allclose(rpd3[0], PD_SV)
    # Cayla, published at t2 on Cancer-II / GERD / Depression, which Table 7 has no row for:
    # nothing can follow, so Eq. 3 gives 0 everywhere and the row falls back to PD_sv
    third = np.zeros(len(VALUES))
    third[[V["Cancer-II"], V["GERD"], V["Depression"]]] = 1 / 3
    assert (third @ model.t1).sum() == 0 and rpd3[1] == pytest.approx(PD_SV)
    # t4: Cayla (not published at t3) and Dior (absent at t3) are revised from their t2 posterior
    assert rpd4[0] == pytest.approx(PD_SV) and rpd4[1] == pytest.approx(PD_SV)
    assert not np.allclose(rpd4[1], rpd2[1])  # not the prior Dior was given at t2


def test_absent_respondent_keeps_the_prior_it_was_last_given_under_last_prior():
    """absent=last_prior, the lab's earlier reading: the prior given at the last appearance."""
    model = ExampleModel()
    rpd2, rpd3, rpd4 = _absent_history(knowledge(absent="last_prior"), model)
    assert rpd3[0] == pytest.approx(PD_SV)  # Alice: the prior she was given at t1
    assert rpd3[1] == pytest.approx(PD_SV)  # Cayla, published at t2: Eq. 3 falls back to PD_sv
    assert rpd4[0] == pytest.approx(rpd3[1]) and rpd4[1] == pytest.approx(rpd2[1])


def test_a_respondent_never_published_keeps_its_last_prior_under_either_reading():
    model = ExampleModel()
    for absent in ("revised", "last_prior"):
        k = knowledge(absent=absent)
        k.prior(release(1, [ALICE, BETH], model))
        v1 = view(1, [([ALICE], ["Flu"])])  # Beth is in the release but suppressed
        k.revise(v1, np.eye(len(VALUES))[[V["Flu"]]], v1.respondent)
        rpd = k.prior(release(3, [BETH], model))
        assert rpd[0] == pytest.approx(PD_SV), absent


def test_two_step_revision_of_an_absent_respondent_uses_its_last_two_publications():
    """Published at t1 and t2, absent at t3, back at t4: d = 2 from PB(t1), as at t3."""
    k, model, (old, last) = _two_step_setup("literal")
    _assert_literal_two_step(k.prior(release(4, [0, 1, 2], model)), model, old)


def _two_step_setup(revision):
    rng = np.random.default_rng(3)
    m = len(VALUES)
    t1 = rng.dirichlet(np.ones(m), size=m)
    t2 = rng.dirichlet(np.ones(m), size=(m, m))
    model = ExampleModel(t2)
    model.t1 = t1
    k = knowledge(steps=2, revision=revision)
    ids = [0, 1, 2]
    posts = []
    for t in (1, 2):
        k.prior(release(t, ids, model))
        v = view(t, [(ids, ["Flu", "GERD", "Cancer-I"])])
        post = rng.dirichlet(np.ones(m), size=3)
        k.revise(v, post, v.respondent)
        posts.append(post)
    return k, model, posts


def _summed_by_hand(weight_ab, t2):
    """Σ_{a,b} weight(a, b) · PD2(s | a, b), one (a, b) at a time, normalized."""
    m = len(t2)
    hand = np.zeros(m)
    for a in range(m):
        for b in range(m):
            hand += weight_ab(a, b) * t2[a, b]
    return hand / hand.sum()


def test_two_step_literal_uses_the_oldest_posterior_chained_through_pd1():
    """Eq. 3–4, d = 2: RPD(s) = Σ_{a,b} PB(a, t-2) PD1(b|a) PD2(s|a,b), summed by hand."""
    k, model, (old, last) = _two_step_setup("literal")
    rpd = k.prior(release(3, [0, 1, 2], model))
    _assert_literal_two_step(rpd, model, old)
    for r in range(3):  # the last posterior does not enter the literal reading
        assert not np.allclose(rpd[r], (last[r] @ model.t1) / (last[r] @ model.t1).sum())


def _assert_literal_two_step(rpd, model, old):
    for r in range(len(old)):
        hand = _summed_by_hand(lambda a, b: old[r, a] * model.t1[a, b], model.t2)
        assert rpd[r] == pytest.approx(hand, rel=1e-10)


def test_two_step_product_is_js_reduce_revision():
    """JS-reduce's revision: RPD(s) = Σ_{a,b} PB(a, t-2) PB(b, t-1) PD2(s|a,b)."""
    k, model, (old, last) = _two_step_setup("product")
    rpd = k.prior(release(3, [0, 1, 2], model))
    for r in range(3):
        hand = _summed_by_hand(lambda a, b: old[r, a] * last[r, b], model.t2)
        assert rpd[r] == pytest.approx(hand, rel=1e-10)


def test_two_step_needs_both_releases_and_otherwise_revises_with_one_step():
    """Respondent 0 is published at t1, t2, t3; respondent 1 at t1, t2, then in release 3 but
    suppressed from its publication; respondent 2 only at t2 and t3 (as a new id 9 at t2)."""
    k, model, (old, last) = _two_step_setup("literal")
    k.prior(release(3, [0, 1, 9], model))
    v = view(3, [([0, 9], ["Flu", "GERD"])])
    post3 = np.zeros((2, len(VALUES)))
    post3[0, V["Flu"]] = post3[1, V["GERD"]] = 1
    k.revise(v, post3, v.respondent)
    rpd = k.prior(release(4, [0, 9], model))
    # id 0: published at t2 and t3 -> d = 2 from the oldest, PB(t2)
    hand = np.einsum("a,ab,abs->s", last[0], model.t1, model.t2)
    assert rpd[0] == pytest.approx(hand / hand.sum())
    # id 9: published at t3 only (new at t3) -> d = 1 from PB(t3)
    one = post3[1] @ model.t1
    assert rpd[1] == pytest.approx(one / one.sum())


def test_uniform_correlation_gives_returning_respondents_a_uniform_prior():
    model = ExampleModel()
    k = knowledge(correlation="uniform", sv="uniform")
    k.prior(release(1, range(6), model))
    v1 = view(1, [GROUP1, GROUP2])
    k.revise(v1, table8_posterior(v1), v1.respondent)
    rpd = k.prior(release(2, [CAYLA, 7], model))
    assert rpd == pytest.approx(np.full((2, len(VALUES)), 1 / len(VALUES)))


def test_without_a_model_the_error_names_the_fix():
    r = Release(1, SCHEMA, np.arange(3), np.zeros((3, 1)), np.zeros(3, dtype=np.int64))
    with pytest.raises(DataError, match="knowledge.sv=kernel"):
        knowledge().prior(r)
    assert knowledge(sv="uniform", correlation="uniform").prior(r).shape == (3, 11)


@pytest.mark.parametrize("kwargs, message", [
    ({"steps": 3}, "steps must be 1 or 2 (got 3)"),
    ({"revision": "chain"}, "revision must be 'literal' or 'product'"),
    ({"absent": "forget"}, "absent must be 'revised' or 'last_prior'"),
    ({"sv": "x"}, "sv must be 'model', 'kernel' or 'uniform'"),
    ({"correlation": "mined"}, "correlation must be 'model' or 'uniform'"),
])
def test_params_are_checked(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        BayFrameKnowledgeParams(**kwargs)


def test_sv_kernel_is_the_kernel_reference_with_its_own_bandwidth():
    """sv=kernel: PD_sv is the referenced knowledge's prior (classic's kernel by default, bandwidth
    0.3 as the knowledge's former own ``bandwidth``), set at knowledge.kernel.bandwidth."""
    reg = default_registry()
    sens = np.array([0, 3, 3, 7, 10, 1])
    r = Release(1, SCHEMA, np.arange(6), np.array([[20.0], [25.0], [40.0], [41.0], [70.0], [90.0]]), sens)
    default = knowledge(sv="kernel", correlation="uniform")
    assert default.params.kernel.plugin_name == "kernel" and default.params.kernel.params.bandwidth == 0.3
    assert default.prior(r) == pytest.approx(reg.create("knowledge", "kernel", {"bandwidth": 0.3}).prior(r), abs=0)
    wide = knowledge(sv="kernel", correlation="uniform", kernel={"bandwidth": 0.8})
    assert wide.prior(r) == pytest.approx(reg.create("knowledge", "kernel", {"bandwidth": 0.8}).prior(r), abs=0)
    assert knowledge(sv="kernel", correlation="uniform", kernel="uniform").prior(r) == pytest.approx(np.full((6, 11), 1 / 11))
    with pytest.raises(ConfigError, match=r"^knowledge\.bandwidth is not a parameter of knowledge 'bayframe'"):
        knowledge(bandwidth=0.5)
    with pytest.raises(ConfigError, match=r"^knowledge\.kernel\.bandwidth must be a number > 0 \(got -1\.0\)$"):
        knowledge(kernel={"bandwidth": -1.0})
