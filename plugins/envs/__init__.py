"""Tool environments over real databases, for rollouts and for replaying logged trajectories."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

# domain -> "module:Class"; imported on first use so that loading one domain costs nothing for the others.
DOMAINS = {"retail": "rewardkit.plugins.envs.retail.env:RetailEnv"}


def env_class(domain: str) -> Any:
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; known domains: {', '.join(DOMAINS)}")
    module, name = DOMAINS[domain].split(":")
    return getattr(importlib.import_module(module), name)


def make_env(domain: str, db_path: str | Path | None = None) -> Any:
    """A fresh environment of ``domain`` (a private copy of its database)."""
    return env_class(domain)(db_path)
