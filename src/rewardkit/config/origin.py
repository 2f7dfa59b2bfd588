"""Where each value of a loaded configuration came from: ``default``, the file, ``overrides`` or a flag.

One rule merges the sources, later wins: the declared defaults, then the file (``path`` or ``$REWARDKIT_CONFIG``),
then a caller's ``overrides``, then the command-line flags the user gave. :class:`~rewardkit.config.load.Config`
keeps the source of every setting by its dotted key (``cfg.origin("user_sim.timeout_s")``). This module renders it,
the one place that does: :func:`provenance` for a run's report, :func:`sources_line` for a log, :func:`named` for
an error message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rewardkit.config.declare import plain


def items(raw: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``raw``'s values that are not a mapping, by dotted key (an empty mapping sets nothing)."""
    for key, value in raw.items():
        if isinstance(value, Mapping):
            yield from items(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def record(origins: dict[str, str], layer: Mapping[str, Any], source: str) -> None:
    """Note ``source`` as the origin of every value ``layer`` sets, replacing what it overrides."""
    for key, _ in items(layer):
        for old in [k for k in origins if k == key or k.startswith(f"{key}.") or key.startswith(f"{k}.")]:
            del origins[old]
        origins[key] = source


def nested(key: str, value: Any) -> dict[str, Any]:
    """``a.b`` and a value as the mapping ``{"a": {"b": value}}``."""
    head, _, rest = key.partition(".")
    return {head: nested(rest, value) if rest else value}


def provenance(cfg: Any, *sections: str) -> dict[str, dict[str, Any]]:
    """Every setting of ``sections`` (keys of ``cfg``) by dotted key: its value and where it came from."""
    data = {section: plain(getattr(cfg, section)) for section in sections}
    return {key: {"value": value, "from": cfg.origin(key)} for key, value in items(data)}


def sources_line(cfg: Any, *sections: str) -> str:
    """One line for a log: each setting of ``sections`` that is not a default as ``key=value (source)``."""
    found = provenance(cfg, *sections).items()
    given = [f"{key}={v['value']!r} ({v['from']})" for key, v in found if v["from"] != "default"]
    return "; ".join([*given, "every other setting: default"])


def named(cfg: Any, key: str) -> str:
    """How a message names where ``key``'s value came from: the flag, ``key (FILE)``, or the key (a default)."""
    origin = cfg.origin(key)
    return origin if origin.startswith("--") else key if origin == "default" else f"{key} ({origin})"
