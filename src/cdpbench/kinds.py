"""The plugin kinds: the one declaration of their names and entry-point groups (no imports, so
the command line can read them without loading numpy; the base classes are in
:mod:`cdpbench.plugin`)."""

#: kind -> entry-point group a plugin of that kind registers under
ENTRY_POINT_GROUPS: dict[str, str] = {
    "dataset": "cdpbench.datasets",
    "knowledge": "cdpbench.knowledge",
    "estimator": "cdpbench.estimators",
    "privacy_model": "cdpbench.privacy_models",
    "anonymizer": "cdpbench.anonymizers",
    "attacker": "cdpbench.attackers",
    "metric": "cdpbench.metrics",
}
#: the kinds a run chooses one plugin of, as the config group of that name (``attacker=snapshot``);
#: metrics are all on at once (``metrics.<name>.enabled``)
GROUP_KINDS: tuple[str, ...] = tuple(kind for kind in ENTRY_POINT_GROUPS if kind != "metric")

#: the entry-point group a distribution ships experiment presets under: ``NAMESPACE = "package"``
#: makes the YAML files of that package (a folder) the presets ``+experiment=NAMESPACE/...``
PRESETS_GROUP = "cdpbench.presets"
