"""Tool environments over real databases, for rollouts and for replaying logged trajectories."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

# domain -> "module:Class"; imported on first use so that loading one domain costs nothing for the others.
# The module also provides the domain's data: tasks(), splits() and policy().
DOMAINS = {"retail": "rewardkit.plugins.envs.retail.env:RetailEnv"}


def domain_module(domain: str) -> ModuleType:
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; known domains: {', '.join(DOMAINS)}")
    return importlib.import_module(DOMAINS[domain].split(":")[0])


def env_class(domain: str) -> Any:
    return getattr(domain_module(domain), DOMAINS[domain].split(":")[1])


def make_env(domain: str, db_path: str | Path | None = None) -> Any:
    """A fresh environment of ``domain`` (a private copy of its database)."""
    return env_class(domain)(db_path)
