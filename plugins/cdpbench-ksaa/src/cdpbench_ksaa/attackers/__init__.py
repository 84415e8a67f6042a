"""The KSAA package's attacker (``cdpbench.attackers``): ``linkage``."""
