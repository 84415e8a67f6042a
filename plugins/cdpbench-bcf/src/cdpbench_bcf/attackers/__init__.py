"""The BCF package's attackers (``cdpbench.attackers``): ``correspondence``, ``forward``, ``cross``, ``backward``."""
