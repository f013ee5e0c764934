"""Class paths that runs saved before rlrun's modules moved into sub-packages (2026-12-04) name in their
configs' `_target_`, read as the class the same path meant then and never as anything else: a saved config
may name no more classes than before, only the old spelling of the same ones."""

from __future__ import annotations

from collections.abc import Mapping

MOVED_TARGETS = {"network": {"rlrun.networks.QNetwork": "rlrun.nets.networks.QNetwork"}}


def with_current_targets(saved: object) -> object:
    """`saved` with each group's `_target_` that names a moved class renamed to its path today."""
    if not isinstance(saved, Mapping):
        return saved
    renamed = dict(saved)
    for group, moved in MOVED_TARGETS.items():
        node = saved.get(group)
        if isinstance(node, Mapping) and node.get("_target_") in moved:
            renamed[group] = {**node, "_target_": moved[node["_target_"]]}
    return renamed
