"""Where the reward modules are, found without importing any: the files of this folder, and installed packages'.

A reward is one module, named by its registry key: ``rewards/think_length.py`` is ``think_length``. Every public
module of this folder is one, except the library's own (:data:`LIBRARY`); a leading underscore marks a helper. An
installed package adds one through the ``rewardkit.rewards`` entry-point group, ``key = "package.module"``
(``[project.entry-points."rewardkit.rewards"]`` in its ``pyproject.toml``). The config loader reads these keys to
tell a reward's section from a typo; :mod:`rewardkit.rewards.registry` imports the modules when asked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType

from rewardkit.errors import UserError

GROUP = "rewardkit.rewards"
PACKAGE = "rewardkit.rewards"
# The public modules of this folder that are not rewards: the answer format, the config, GRPO groups, the registry,
# the sets.
LIBRARY = frozenset({"answers", "config", "groups", "registry", "sets"})
KEY = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


class RegistryError(UserError, ValueError):
    """A reward module is missing, misnamed or declares something the registry cannot use."""


@cache
def reward_modules() -> Mapping[str, str]:
    """Registry key -> module name: this folder's reward files (by name), then the entry points (by name)."""
    here = Path(__file__).resolve().parent
    found = {
        p.stem: f"{PACKAGE}.{p.stem}"
        for p in sorted(here.glob("*.py"))
        if not p.stem.startswith("_") and p.stem not in LIBRARY
    }
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        where = f"entry point {ep.name!r} = {ep.value!r} of {ep.dist.name if ep.dist else 'an installed package'}"
        if ep.name in found:
            raise RegistryError(f"{where}: {ep.name!r} is already the reward {found[ep.name]}; rename the entry point")
        if not KEY.fullmatch(ep.name) or ":" in ep.value:
            raise RegistryError(f"{where}: the name must be a snake_case key and the value a module ('pkg.module')")
        found[ep.name] = ep.value
    return MappingProxyType(found)


def class_name(key: str) -> str:
    """The class a reward module defines: its key in CamelCase (``task_completion_rate`` -> ``TaskCompletionRate``)."""
    return "".join(part.capitalize() for part in key.split("_"))


def key_of(name: str) -> str:
    """The registry key of a reward class name (``ThinkLength`` -> ``think_length``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
