"""Tool environments over real databases, for rollouts and for replaying logged trajectories.

Every caller goes through the domain registry (:mod:`rewardkit.plugins.envs.domain`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rewardkit.plugins.envs.domain import Domain, StatefulEnvironment, domain_names, get_domain, register_domain

if TYPE_CHECKING:
    from rewardkit.plugins.envs.harness import ToolEnvironment


def make_env(domain: str, db_path: str | Path | None = None) -> ToolEnvironment:
    """A fresh environment of ``domain`` (a private copy of its database)."""
    return get_domain(domain).make_env(db_path)


__all__ = ["Domain", "StatefulEnvironment", "domain_names", "get_domain", "make_env", "register_domain"]
