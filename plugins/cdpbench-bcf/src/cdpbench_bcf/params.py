"""The parameters every BCF plugin takes: the threshold k and the reading of unrealisable targets.

The privacy model (``bcf_anonymity``) and the attackers own their ``k``; the anonymizer's is
optional (:class:`BCFAnonymizerParams`): null takes the run's privacy model's k at publish time."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdpbench.errors import ConfigError, require
from cdpbench.plugin import PublishContext


@dataclass
class BCFParams:
    k: int = field(
        default=40,
        metadata={"help": "BCF-anonymity threshold: FA, CA, BA >= k (BCF §3.2); attackers count the respondents below it; >= 1"},
    )
    phantom: bool = field(
        default=False,
        metadata={"help": "keep targets no generator can realise (literal Defs. 3.2/3.6: anonymity 0; see the README)"},
    )

    def __post_init__(self) -> None:
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)
        require(isinstance(self.phantom, bool), "phantom", "true or false", self.phantom)


@dataclass
class BCFAnonymizerParams:
    k: int | None = field(
        default=None,
        metadata={"help": "BCF-anonymity threshold: FA, CA, BA >= k (BCF §3.2); >= 1; null = the run's privacy model's k"},
    )
    phantom: bool = field(
        default=False,
        metadata={"help": "keep targets no generator can realise (literal Defs. 3.2/3.6: anonymity 0; see the README)"},
    )

    def __post_init__(self) -> None:
        if self.k is not None:
            require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k",
                    "an integer >= 1, or null for the privacy model's k", self.k)
        require(isinstance(self.phantom, bool), "phantom", "true or false", self.phantom)


def anonymizer_k(own: int | None, ctx: PublishContext) -> int:
    """The k an anonymizer works with: its own ``k`` when given (an explicit value wins: it may be
    run against another model on purpose), else the run's privacy model's ``k``; a one-line
    :class:`ConfigError` naming ``anonymizer.k`` when neither exists."""
    if own is not None:
        return own
    model = ctx.privacy_model
    k = getattr(getattr(model, "params", None), "k", None)
    if k is None:
        which = "the run has no privacy model" if model is None else (
            f"privacy model {getattr(model, 'plugin_name', type(model).__name__)!r} has no k")
        raise ConfigError(f"anonymizer.k is null (the privacy model's k) but {which}: set anonymizer.k to an integer >= 1")
    require(isinstance(k, int) and not isinstance(k, bool) and k >= 1, "privacy_model.k (anonymizer.k is null)", "an integer >= 1", k)
    return k
