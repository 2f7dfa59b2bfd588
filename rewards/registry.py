"""The registry: every reward module found (``rewards/_found.py``), imported when first asked for, and what the
rest of rewardkit reads from the declarations beside each formula.

A reward module ``<key>.py`` defines one class, ``<Key>`` (its key in CamelCase), a subclass of the reward base:
``reward(<key>)`` of its function, or a class written out. Its class attributes are its declaration: ``columns``
and ``optional_columns`` (what it reads), ``range`` and ``may_return_none`` (what it promises), ``section`` (its
``<key>:`` settings, declared in the same file), ``order`` (where lists put it) and ``sets`` (the recipe sets it
joins, with its weight). :data:`REWARDS` maps every key to its class in that order. :func:`register` puts them all
into ms-swift's ``orms``; :func:`config_schema` is every section, which ``rewardkit config``, ``lint`` and the
loop's whole-file schema read.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from functools import cache
from typing import Any

from rewardkit.config import ConfigSchema
from rewardkit.rewards._base import Reward
from rewardkit.rewards._found import RegistryError, class_name, reward_modules
from rewardkit.rewards.config import LOOP_SECTIONS, REFERENCE, RewardConfig, SharedConfig


@cache
def reward_class(key: str) -> type[Reward]:
    """The reward class of ``key``, its module imported and its declaration checked."""
    modules = reward_modules()
    if key not in modules:
        raise KeyError(f"no reward {key!r}; known: {', '.join(modules)}")
    module = importlib.import_module(modules[key])
    name = class_name(key)
    cls = getattr(module, name, None)
    where = getattr(module, "__file__", modules[key])
    if not (isinstance(cls, type) and issubclass(cls, Reward) and cls.__module__ == module.__name__):
        raise RegistryError(
            f"{where}: the reward module {key!r} must define class {name}(Reward) (a file per reward, named by "
            f"its key); a helper module's name starts with '_'"
        )
    _check_declaration(cls, where)
    return cls


def _check_declaration(cls: type[Reward], where: str) -> None:
    if not isinstance(cls.order, int) or isinstance(cls.order, bool):
        raise RegistryError(f"{where}: {cls.__name__}.order must be an int (where lists put it); got {cls.order!r}")
    section = cls.section
    if section is not None and not getattr(section, "SECTION", None):
        raise RegistryError(f"{where}: {cls.__name__}.section must be a @config_section class; got {section!r}")
    for name, weight in cls.sets.items():
        if not isinstance(name, str) or isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise RegistryError(f"{where}: {cls.__name__}.sets maps a set's name to a number; got {name!r}: {weight!r}")


class Rewards(Mapping[str, type]):
    """Registry key -> reward class, ordered by each class's ``order`` (then key); a lookup imports one module,
    iterating imports them all."""

    def __getitem__(self, key: str) -> type:
        if key not in reward_modules():
            raise KeyError(key)
        return reward_class(key)

    def __contains__(self, key: object) -> bool:
        return key in reward_modules()

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(reward_modules(), key=lambda key: (reward_class(key).order, key)))

    def __len__(self) -> int:
        return len(reward_modules())

    def __repr__(self) -> str:
        return f"Rewards({', '.join(self)})"


REWARDS = Rewards()


def sections() -> tuple[type, ...]:
    """Every reward's settings section, once each, in registry order."""
    found = dict.fromkeys(cls.section for cls in REWARDS.values() if cls.section is not None)
    return tuple(found)


@cache
def config_schema() -> ConfigSchema:
    """The rewards' whole schema: the shared settings and every section; the loop's sections only as mappings."""
    return ConfigSchema(
        shared=SharedConfig, sections=sections(), reserved=LOOP_SECTIONS, reference=REFERENCE, config_class=RewardConfig
    )


def register(registry: MutableMapping[str, Any] | None = None) -> MutableMapping[str, Any]:
    """Add every reward to ``registry`` (default: ms-swift's ``orms``); idempotent."""
    if registry is None:
        from swift.rewards import orms

        registry = orms
    for key, cls in REWARDS.items():
        current = registry.get(key)
        if current is not None and current is not cls and current.__module__ != cls.__module__:
            raise ValueError(f"orms[{key!r}] already holds {current!r}; refusing to replace it with {cls!r}")
        registry[key] = cls
    return registry
