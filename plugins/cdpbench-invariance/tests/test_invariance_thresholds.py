"""The threshold lives in the privacy model (issue #25 item 4): an anonymizer's ``m`` (``l`` for
``tau_safe_lk``) is null by default and then read from ``PublishContext.privacy_model`` at publish
time; an explicit value wins; with neither, the first publish fails with a one-line ConfigError."""

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from cdpbench.errors import ConfigError
from cdpbench.plugin import PrivacyModel
from cdpbench.registry import default_registry
from cdpbench_invariance.family import InvarianceParams
from cdpbench_invariance.anonymizers.m_invariance import MInvariance
from cdpbench_invariance.anonymizers.sliced_bucket import SlicedBucket, SlicedBucketParams
from cdpbench_invariance.anonymizers.tau_safe_lk import TauSafeLK, TauSafeLKParams
from cdpbench_invariance.anonymizers.tau_safety import TauSafety
from cdpbench_invariance.privacy_models.m_invariance import MInvarianceModel
from cdpbench_invariance.history_verifier import MUniqueParams
from cdpbench_invariance.privacy_models.sliced_bucket import SlicedBucketModel
from cdpbench_invariance.privacy_models.tau_safety import TauSafetyModel

sys.path.insert(0, str(Path(__file__).parent))
from test_invariance_properties import publish_all, scenario  # noqa: E402

#: name -> (anonymizer with the threshold given, or None for the default; its whole-history model)
METHODS = {
    "m_invariance": (lambda m=None: MInvariance(InvarianceParams(m=m)), MInvarianceModel),
    "tau_safety": (lambda m=None: TauSafety(InvarianceParams(m=m)), TauSafetyModel),
    "tau_safe_lk": (lambda m=None: TauSafeLK(TauSafeLKParams(l=m)), TauSafetyModel),
    "sliced_bucket": (lambda m=None: SlicedBucket(SlicedBucketParams(m=m)), SlicedBucketModel),
}


@dataclass
class KOnlyParams:
    k: int = 3


class KOnlyModel(PrivacyModel):
    """A privacy model with no m (k-anonymity alone)."""

    Params = KOnlyParams

    def accepts(self, batch, ctx):
        return batch.sizes() >= self.params.k


@dataclass
class AnyM:
    m: object = 1


class BadMModel(KOnlyModel):
    Params = AnyM


def same(a, b) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x.group, y.group) and np.array_equal(x.respondent, y.respondent)
        and np.array_equal(x.sensitive, y.sensitive) and np.array_equal(x.suppressed, y.suppressed)
        for x, y in zip(a, b))


@pytest.mark.parametrize("name", list(METHODS))
def test_the_default_is_null_and_takes_the_privacy_models_m(name):
    make, model_cls = METHODS[name]
    default = make()
    assert (default.params.l if name == "tau_safe_lk" else default.params.m) is None
    releases = scenario(1)
    from_model = publish_all(default, releases, model_cls(MUniqueParams(m=3)))
    explicit = publish_all(make(3), releases, None)
    assert same(from_model, explicit)
    assert min(((p.bucket_counts() > 0).sum(axis=1).min() for p in from_model)) == 3
    assert not same(from_model, publish_all(make(2), releases, None))


@pytest.mark.parametrize("name", list(METHODS))
def test_an_explicit_value_wins_over_the_privacy_models(name):
    make, model_cls = METHODS[name]
    releases = scenario(2)
    against_4 = publish_all(make(2), releases, model_cls(MUniqueParams(m=4)))
    assert same(against_4, publish_all(make(2), releases, None))
    assert not same(against_4, publish_all(make(4), releases, None))


@pytest.mark.parametrize("name", list(METHODS))
@pytest.mark.parametrize("model, which", [(None, "the run has no privacy model"),
                                          (KOnlyModel(), "privacy model 'KOnlyModel' has no m")])
def test_with_neither_the_first_publish_is_a_one_line_error(name, model, which):
    make, _ = METHODS[name]
    key = "l" if name == "tau_safe_lk" else "m"
    message = rf"^anonymizer\.{key} is null \(the privacy model's m\) but {which}: set anonymizer\.{key} to an integer >= 2$"
    with pytest.raises(ConfigError, match=message) as err:
        publish_all(make(), scenario(0, releases=1), model)
    assert "\n" not in str(err.value)


def test_the_error_uses_the_registry_name_and_checks_the_models_value():
    model = KOnlyModel()
    model.plugin_name = "k_anonymity"
    with pytest.raises(ConfigError, match=r"^anonymizer\.m is null \(the privacy model's m\) but privacy model 'k_anonymity' has no m"):
        publish_all(MInvariance(), scenario(0, releases=1), model)
    with pytest.raises(ConfigError, match=r"^privacy_model\.m \(anonymizer\.m is null\) must be an integer >= 2 \(got 1\)$"):
        publish_all(MInvariance(), scenario(0, releases=1), BadMModel())


def test_a_model_m_above_the_domain_names_privacy_model_m():
    with pytest.raises(ConfigError, match=r"^privacy_model\.m must be at most the 7 sensitive values of the data set \(got 8\)$"):
        publish_all(SlicedBucket(), scenario(0, releases=1), SlicedBucketModel(MUniqueParams(m=8)))


def test_tau_safe_lk_k_defaults_to_the_models_k_else_l_and_may_exceed_l_only_when_angelized():
    from cdpbench_invariance.privacy_models.tau_safe_lk import TauSafeLKModel, TauSafeLKModelParams

    releases = scenario(3, releases=2)
    model = TauSafetyModel(MUniqueParams(m=3))  # no k: k = l
    assert same(publish_all(TauSafeLK(TauSafeLKParams()), releases, model), publish_all(TauSafeLK(TauSafeLKParams(l=3, k=3)), releases, None))
    with_k = TauSafeLKModel(TauSafeLKModelParams(m=3, k=5))
    by_model = publish_all(TauSafeLK(TauSafeLKParams()), releases, with_k)
    assert same(by_model, publish_all(TauSafeLK(TauSafeLKParams(l=3, k=5)), releases, None))
    assert min(p.group_sizes().min() for p in by_model) == 5
    assert not same(by_model, publish_all(TauSafeLK(TauSafeLKParams(l=3, k=3)), releases, None))
    publish_all(TauSafeLK(TauSafeLKParams(k=4)), releases, model)  # k > l: QI groups apart from the buckets
    with pytest.raises(ConfigError, match=r"^anonymizer\.k must be an integer in \[1, l = 3\] \(l from privacy_model\.m\) with form=buckets \(got 4\)$"):
        publish_all(TauSafeLK(TauSafeLKParams(k=4, form="buckets")), releases, model)
    with pytest.raises(ConfigError, match=r"^k must be an integer in \[1, l = 2\] with form=buckets"):
        TauSafeLKParams(l=2, k=3, form="buckets")
    with pytest.raises(ConfigError, match=r"^form must be one of 'angelized', 'buckets' \(got 'gt'\)$"):
        TauSafeLKParams(form="gt")


@pytest.mark.parametrize("name", list(METHODS))
def test_through_the_registry_null_is_the_default_and_bad_values_are_refused(name):
    reg = default_registry()
    key = "l" if name == "tau_safe_lk" else "m"
    anon = reg.create("anonymizer", name)
    assert getattr(anon.params, key) is None
    assert getattr(reg.create("anonymizer", name, {key: 5}).params, key) == 5
    with pytest.raises(ConfigError, match=rf"^anonymizer\.{key} must be an integer >= 2, or null for the privacy model's {key} \(got 1\)$"):
        reg.create("anonymizer", name, {key: 1}, where="anonymizer")
    model = reg.create("privacy_model", "tau_safety" if name == "tau_safe_lk" else name, {"m": 3})
    releases = scenario(4, releases=2)
    assert same(publish_all(anon, releases, model), publish_all(METHODS[name][0](3), releases, None))
