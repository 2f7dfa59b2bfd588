"""Config values as plain mappings: layers merged key by key, and the NaN or infinity no schema refuses."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` laid over it, mappings merged key by key (both left unchanged)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def non_finite(value: Any, path: tuple[str, ...] = (), seen: frozenset[int] = frozenset()) -> tuple[str, Any] | None:
    """The dotted key and value of the first NaN or infinity under ``value``, if any.

    JSON Schema's ``number`` admits NaN and infinities, and NaN passes every
    ``minimum``/``maximum`` (all comparisons are false): only this catches them.
    ``seen`` guards against YAML anchors that make a list contain itself.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return ".".join(path), value
    if id(value) in seen or not isinstance(value, (Mapping, list)):
        return None
    seen = seen | {id(value)}
    items = value.items() if isinstance(value, Mapping) else enumerate(value)
    for key, item in items:
        found = non_finite(item, (*path, str(key)), seen)
        if found is not None:
            return found
    return None
