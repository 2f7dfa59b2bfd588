"""The config of one ``synth agent`` / ``eval agent`` run: the file's ``user_sim`` and ``rollout`` sections, and the
flags the user gave laid over them (a flag wins; a flag left out leaves the file's value, or the default).

Each flag names one key, but ``--user``, which stands for the simulator's endpoint as a whole: ``scripted`` sets
``user_sim.kind``; a URL sets ``kind: openai``, ``base_url`` and, without ``--user-model``, ``model`` (the one model
the URL serves). ``cfg.origin(key)`` names where each value came from, for the run's report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rewardkit.config import Config
from rewardkit.loop.config import load_run_config
from rewardkit.runs.episode_log import RunError

if TYPE_CHECKING:
    from rewardkit.runs.spec import RunSpec

# RunSpec field -> (its flag, the config key it sets)
FLAGS = {
    "user_model": ("--user-model", "user_sim.model"),
    "user_retries": ("--user-retries", "user_sim.retries"),
    "user_timeout": ("--user-timeout", "user_sim.timeout_s"),
    "user_cache": ("--user-cache", "user_sim.cache"),
    "max_turns": ("--max-turns", "rollout.max_turns"),
}
SECTIONS = ("user_sim", "rollout")  # what a run reads of the file (the report lists their sources)


def run_config(spec: RunSpec) -> Config:
    """The whole config file (``spec.config``, else ``$REWARDKIT_CONFIG``) with ``spec``'s given flags laid over it."""
    flags = _user_flags(spec.user, spec.user_model)
    for field, (flag, key) in FLAGS.items():
        value = getattr(spec, field)
        if value is not None:
            flags[key] = (flag, str(value) if field == "user_cache" else value)
    return load_run_config(path=spec.config, flags=flags)  # a message names the file, or the flag


def _user_flags(user: str | None, model: str | None) -> dict[str, tuple[str, Any]]:
    if user is None:
        return {}
    if user == "scripted":
        return {"user_sim.kind": ("--user", "scripted")}
    if not user.startswith(("http://", "https://")):
        raise RunError(f"--user {user!r}: pass scripted or an http(s):// URL")
    flags = {"user_sim.kind": ("--user", "openai"), "user_sim.base_url": ("--user", user)}
    if model is None:
        flags["user_sim.model"] = ("--user", _only_model(user))
    return flags


def _only_model(base_url: str) -> str:
    from rewardkit.loop.endpoint import only_model

    try:
        return only_model(base_url, "pass --user-model")
    except ValueError as exc:
        raise RunError(f"--user {base_url}: {exc}") from exc


def where_from(cfg: Config, key: str) -> str:
    """How a message names where ``key``'s value came from: the flag, ``key (FILE)``, or the key (a default)."""
    origin = cfg.origin(key)
    return origin if origin.startswith("--") else key if origin == "default" else f"{key} ({origin})"
