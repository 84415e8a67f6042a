"""BCF Example 1.1 (Tables 1–2, specs/bcf.md §2.1) end to end: publications built from the raw
records, the public views an adversary sees, the attackers, the whole-history verifier, and the
§7.1 composition on a third release."""

from __future__ import annotations

import numpy as np
import pytest

from cdpbench.data import History, Publication
from cdpbench.plugin import AttackContext, ModelContext
from cdpbench.schema import CategoricalQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_bcf.attackers.backward import BackwardAttacker
from cdpbench_bcf.attackers.correspondence import CorrespondenceAttacker
from cdpbench_bcf.attackers.cross import CrossAttacker
from cdpbench_bcf.attackers.forward import ForwardAttacker
from cdpbench_bcf.classes import Classes
from cdpbench_bcf.correspondence import attack_pair, group_pairs
from cdpbench_bcf.history import ReleaseChain
from cdpbench_bcf.params import BCFParams
from cdpbench_bcf.privacy_models.bcf_anonymity import BCFAnonymity

BIRTH = Taxonomy.from_paths([["UK", "Europe"], ["France", "Europe"]])
JOB = Taxonomy.from_paths([["Lawyer", "Professional"], ["Doctor", "Professional"]])
SCHEMA = Schema((CategoricalQI("Birthplace", BIRTH), CategoricalQI("Job", JOB)), Sensitive("Disease", ("Flu", "HIV")), time="time")
UK, FR, LAW, DOC, FLU, HIV = 0, 1, 0, 1, 0, 1

# raw records: a1..a5 (D1, T1) then b6..b10's originals (D2, T2); b1..b5 are a1..a5 in R2
D1 = [(UK, LAW, FLU)] * 3 + [(FR, LAW, HIV)] * 2
D2 = [(FR, LAW, HIV), (FR, DOC, FLU), (FR, DOC, FLU), (UK, DOC, HIV), (UK, LAW, HIV)]


def release(records, t):
    from cdpbench.data import Release

    arr = np.array(records, dtype=np.int64)
    n = len(arr)
    time = np.array([1] * 5 + [2] * (n - 5), dtype=np.int64)[:n]
    return Release(t, SCHEMA, np.arange(n, dtype=np.int64), arr[:, :2].astype(float), arr[:, 2].copy(), time)


R1_RAW = release(D1, 1)
R2_RAW = release(D1 + D2, 2)
# R1: one class [Europe, Lawyer]; R2: [UK, Professional] and [France, Professional] (Table 2)
PUB1 = Publication.from_partition(R1_RAW, np.zeros(5, np.int64))
PUB2 = Publication.from_partition(R2_RAW, np.array([0, 0, 0, 1, 1, 1, 1, 1, 0, 0]))


def test_publications_are_tables_1_and_2():
    assert PUB1.n_groups == 1 and PUB1.low[0].tolist() == [0, 0] and PUB1.high[0].tolist() == [1, 0]  # Europe, Lawyer
    assert PUB2.low.tolist() == [[0, 0], [1, 0]] and PUB2.high.tolist() == [[0, 1], [1, 1]]  # UK/France, Professional
    assert PUB2.group_counts().tolist() == [[3, 2], [2, 3]]


def test_example_crack_sizes_and_anonymities():
    c1, c2 = Classes.from_view(PUB1.public()), Classes.from_view(PUB2.public())
    att = attack_pair(c1, c2)
    # Ex. 4.1 (F): Alice [France, Lawyer] at T1 matches ([Europe, Lawyer], [France, Professional])
    assert att.forward(c1, 0, c2, 1) == {FLU: 1, HIV: 0}
    # Ex. 4.2 (C): same pair, cracks in R2
    assert att.cross(c1, 0, c2, 1) == {FLU: 0, HIV: 1}
    # Ex. 4.3 (B): [UK, Professional] groups Flu {b1..b3} and HIV {b9, b10}
    entries = dict(zip(zip(c2.entry_class.tolist(), c2.entry_value.tolist()), att.backward_crack.tolist()))
    assert entries == {(0, FLU): 1, (0, HIV): 0, (1, FLU): 0, (1, HIV): 0}
    assert (att.FA, att.CA, att.BA) == (4.0, 4.0, 4.0)
    assert att.forward_anonymity.tolist() == [4.0]
    assert att.cross_anonymity.tolist() == [5.0, 4.0]
    assert att.backward_anonymity.tolist() == [4, 5]
    # CG([Europe, Lawyer], [France, Professional]) = {(Flu: 3, 2), (HIV: 2, 3)}
    v, n1, n2 = group_pairs(c1, 0, c2, 1)
    assert (v.tolist(), n1.tolist(), n2.tolist()) == ([FLU, HIV], [3, 2], [2, 3])


def observe(attacker, pubs, raw):
    views = []
    result = None
    for pub, rel in zip(pubs, raw):
        views.append(pub.public())
        result = attacker.observe(views[-1], AttackContext(rel, views, np.random.default_rng(0)))
    return result


# k = 5 (every scenario of Example 1.1 breaks 5-anonymity). F: R1's one class (FA 4) holds all 5
# T1 records; C: only [France, Prof] has C-anonymity 4, its T1 records are a4, a5 (ids 3, 4); B:
# only [UK, Prof] has B-anonymity 4, its T2 records are b9, b10 (ids 8, 9). Union: 7 respondents.
@pytest.mark.parametrize(
    "cls, expected",
    [
        (ForwardAttacker, {"FA": 4.0, "below_k.F": 5.0}),
        (CrossAttacker, {"CA": 4.0, "below_k.C": 2.0}),
        (BackwardAttacker, {"BA": 4.0, "below_k.B": 2.0}),
        (CorrespondenceAttacker, {"FA": 4.0, "CA": 4.0, "BA": 4.0, "below_k.F": 5.0, "below_k.C": 2.0, "below_k.B": 2.0, "below_k": 7.0}),
    ],
)
def test_attackers_on_the_example(cls, expected):
    assert observe(cls(BCFParams(k=5)), [PUB1], [R1_RAW]).extra == {}  # no background yet
    assert observe(cls(BCFParams(k=5)), [PUB1, PUB2], [R1_RAW, R2_RAW]).extra == expected
    at4 = observe(cls(BCFParams(k=4)), [PUB1, PUB2], [R1_RAW, R2_RAW]).extra
    assert all(v == 0.0 for key, v in at4.items() if key.startswith("below_k"))


def test_verifier_counts_violations_against_history():
    for k, bad in ((4, 0), (5, 3)):  # k=5: R1's class (F), [France, Prof] (C) and [UK, Prof] (B)
        model = BCFAnonymity(BCFParams(k=k))
        first = model.verify(PUB1, ModelContext(SCHEMA, R1_RAW.sensitive_distribution(), History(), R1_RAW))
        assert first.violations == 0 and first.levels == {"k": 5.0}
        hist = History([R1_RAW], [PUB1])
        rep = model.verify(PUB2, ModelContext(SCHEMA, R2_RAW.sensitive_distribution(), hist, R2_RAW))
        assert rep.violations == bad and rep.satisfied == (bad == 0)
        assert rep.levels == {"k": 5.0, "FA": 4.0, "CA": 4.0, "BA": 4.0}
    # accepts judges |Q| >= k only
    from cdpbench.data import GroupBatch

    batch = GroupBatch(np.zeros(7, np.int64), np.array([0] * 5 + [1] * 2), 2, 2)
    assert BCFAnonymity(BCFParams(k=5)).accepts(batch, None).tolist() == [True, False]


def test_composition_b_then_f_and_c_on_a_third_release():
    """§7.1 cases 1–2 on R3 = the same 10 records as [Europe, Lawyer] / [Europe, Doctor] (D3
    empty): B(R1, R2) cracks one Flu record of [UK, Prof]; the reduced group (Flu 2, HIV 2) then
    meets [Europe, Lawyer] (Flu 3, HIV 4): Σ min = 2 + 2 = 4 (case 1: anonymity of [UK, Prof]; case
    2: C-crack of [Europe, Lawyer] = (3 - 2) + (4 - 2) = 3, anonymity 7 - 3 = 4), where the micro
    attack on (R2, R3) alone gives 3 + 2 = 5."""
    r3_raw = release(D1 + D2, 3)
    job = r3_raw.qi[:, 1]
    pub3 = Publication.from_partition(r3_raw, job.astype(np.int64))  # Lawyer -> 0, Doctor -> 1
    assert pub3.low[:, 0].tolist() == [0, 0] and pub3.high[:, 0].tolist() == [1, 1]  # Europe
    chain = ReleaseChain()
    cs = [Classes.from_publication(p) for p in (PUB1, PUB2, pub3)]
    chain.add(cs[0])
    second = chain.add(cs[1])
    assert chain.reduced[1].entry_count.tolist() == [2, 2, 2, 3]  # [UK,Prof] Flu 3 -> 2
    assert second.BA == 4.0
    third = chain.attack(cs[2])
    assert sorted(third.pairs) == [0, 1] and sorted(third.composed) == [1]
    micro, comp = third.pairs[1], third.composed[1]
    pairs = dict(zip(zip(comp.pair_a.tolist(), comp.pair_b.tolist()), comp.common.tolist()))
    assert pairs[(0, 0)] == 4 and dict(zip(zip(micro.pair_a.tolist(), micro.pair_b.tolist()), micro.common.tolist()))[(0, 0)] == 5
    assert comp.cross(chain.reduced[1], 0, cs[2], 0) == {FLU: 1, HIV: 2}
    assert third.FA_composed <= min(p.FA for p in third.pairs.values())
