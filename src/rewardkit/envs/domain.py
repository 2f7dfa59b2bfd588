"""The environment contract: what a tool-use domain provides to rollouts, rewards, builders and the CLI.

A domain is one :class:`Domain` object: an environment factory, its tools, its tasks,
their splits and the agent's policy. Everything else (the multi-turn scheduler, the
task-completion rewards, ``rewardkit build tau2-grpo``, ``rewardkit env``) reaches a
domain only through :func:`rewardkit.envs.registry.get_domain`, which imports a domain when first asked for it.
A domain's own modules import this one, never the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewardkit.envs.schema_sql import DomainDataError

__all__ = ["Domain", "DomainDataError"]  # the error lives with the first check of a domain's data, its schema

if TYPE_CHECKING:
    from rewardkit.envs.harness import CallingEnvironment
    from rewardkit.envs.simulated import Simulation
    from rewardkit.envs.tool import Tool


@dataclass(frozen=True)
class Domain:
    """A registered tool-use domain. ``make_env(db_path)`` returns a fresh, private environment."""

    name: str
    make_env: Callable[[str | Path | None], CallingEnvironment]  # the SQLite harness, or an MCP session
    tools: Mapping[str, Tool]
    tasks: Callable[[], dict[str, dict[str, Any]]]  # task id -> tau2 task object (shared: do not mutate)
    splits: Callable[[], dict[str, list[str]]]  # split name -> task ids
    policy: Callable[[], str]  # the agent's system prompt
    guidelines: Callable[[], str] | None = None  # the user simulator's guidelines (how to play the user)
    language: str = "en"  # the language its users speak ("en", "zh"): the scripted user's phrases follow it
    stop_tools: frozenset[str] = frozenset()  # a successful call ends the episode (a transfer to a human)
    data_files: tuple[Path, ...] = ()  # every bundled file the domain reads: no command may write over one
    simulation: Simulation | None = None  # a domain given as a spec: its tools answered from each task's memory

    def env_for(self, task: Mapping[str, Any] | None) -> CallingEnvironment:
        """A fresh environment for ``task``: on a simulated domain, a copy of the task's memory (its ``memory``
        rows, or the one a memory writer gives); else ``make_env(None)``, the same for every task."""
        if self.simulation is not None:
            return self.simulation.env(task)
        return self.make_env(None)

    def fresh_requests(self) -> tuple[dict[str, Any], ...] | None:
        """The approval requests every fresh environment starts with, when they can be read without making one (a
        database domain's ``make_env`` reads its template's); None when only an environment can tell (an MCP
        session, a simulated domain)."""
        read = getattr(self.make_env, "fresh_requests", None) if self.simulation is None else None
        return None if read is None else read()  # type: ignore[no-any-return]

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
