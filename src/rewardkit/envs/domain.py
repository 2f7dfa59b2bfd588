"""The environment contract: what a tool-use domain provides to rollouts, rewards, builders and the CLI.

A domain is one :class:`Domain` object: an environment factory, its tools, its tasks,
their splits and the agent's policy. Everything else (the multi-turn scheduler, the
task-completion rewards, ``rewardkit build tau2-grpo``, ``rewardkit env``) reaches a
domain only through :func:`get_domain`, so a second domain is one new module plus one
:func:`register_domain` call (or one entry in ``BUILTIN``).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rewardkit.envs.harness import ToolEnvironment, ToolSpec


class StatefulEnvironment(ABC):
    """What an environment owes its callers besides running tool calls (see ``ToolEnvironment``).

    ``state_hash`` is the canonical identity of the state (equal states, equal hashes,
    whatever order the writes came in); ``export`` is the state as JSON, in the domain's
    own data format. Neither reads the audit.
    """

    @abstractmethod
    def state_hash(self) -> str: ...

    @abstractmethod
    def export(self) -> dict[str, Any]: ...

    def close(self) -> None:  # noqa: B027 - optional: environments holding connections or sessions release them
        """Release what the environment holds (a database connection, a server session)."""


class DomainDataError(ValueError):
    """A file the domain ships (or was pointed at) cannot be read as what it must hold; names the file."""


@dataclass(frozen=True)
class Domain:
    """A registered tool-use domain. ``make_env(db_path)`` returns a fresh, private environment."""

    name: str
    make_env: Callable[[str | Path | None], ToolEnvironment]
    tools: Mapping[str, ToolSpec]
    tasks: Callable[[], dict[str, dict[str, Any]]]  # task id -> tau2 task object (shared: do not mutate)
    splits: Callable[[], dict[str, list[str]]]  # split name -> task ids
    policy: Callable[[], str]  # the agent's system prompt
    stop_tools: frozenset[str] = frozenset()  # a successful call ends the episode (a transfer to a human)
    data_files: tuple[Path, ...] = ()  # every bundled file the domain reads: no command may write over one

    def input_files(self) -> list[tuple[str, Path]]:
        """The domain's bundled files, labelled for ``check_outputs``: they are inputs of every command that
        uses the domain (read by default: the database, the tasks, the splits, the policy, the simulator's
        guidelines), so no output may be one of them."""
        return [(f"{self.name} domain data", path) for path in self.data_files]

    def tool_specs(self) -> list[dict[str, Any]]:
        """The OpenAI function specs, as ms-swift's ``tools`` column wants them."""
        return [spec.openai() for spec in self.tools.values()]

    @property
    def write_tools(self) -> frozenset[str]:
        return frozenset(name for name, spec in self.tools.items() if spec.risk == "write")


# Built-in domains, imported on first use so that loading one costs nothing for the others.
BUILTIN: dict[str, str] = {"retail": "rewardkit.envs.retail.domain:RETAIL"}
_REGISTERED: dict[str, Domain] = {}


def register_domain(domain: Domain) -> Domain:
    """Make ``domain`` reachable by name; re-registering the same object is harmless."""
    current = _REGISTERED.get(domain.name)
    if current is not None and current is not domain:
        raise ValueError(f"domain {domain.name!r} is already registered; pick another name")
    _REGISTERED[domain.name] = domain
    return domain


def domain_names() -> list[str]:
    return sorted({*BUILTIN, *_REGISTERED})


def get_domain(name: str) -> Domain:
    if name not in _REGISTERED:
        if name not in BUILTIN:
            raise ValueError(f"unknown domain {name!r}; known domains: {', '.join(domain_names())}")
        module, attr = BUILTIN[name].split(":")
        register_domain(getattr(importlib.import_module(module), attr))
    return _REGISTERED[name]
