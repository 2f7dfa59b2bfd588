"""The ``user_sim`` config section: which simulator plays the customer, and how it is called.

Validated strictly and early (when the rollout plugin is built), because a typo such as
``temprature`` or a NaN timeout would otherwise surface hours into a GRPO run as silently
wrong dialogues or as a hung rollout.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.loop.user_sim.base import UserSimulator
from rewardkit.loop.user_sim.cache import CachedSimulator
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards.config import ConfigError, read_config_file

KINDS = ("scripted", "openai")
CACHE_MODES = ("off", "read_write", "replay")
SECTION = "user_sim"


@dataclass(frozen=True)
class UserSimConfig:
    """Settings of the user simulator; see ``load_user_sim_config`` for the rules each field obeys."""

    kind: str = "scripted"  # "scripted" (model-free, CI) or "openai" (any OpenAI-compatible endpoint)
    base_url: str | None = None  # e.g. http://127.0.0.1:8000/v1 (swift deploy, vLLM)
    model: str | None = None
    api_key_env: str | None = None  # NAME of the env var holding the key; None -> "EMPTY" (local servers)
    temperature: float = 0.0
    max_tokens: int = 512
    timeout_s: float = 60.0  # per HTTP call
    retries: int = 3  # extra attempts after the first, on transient failures only
    backoff_s: float = 1.0  # sleep backoff_s * 2**attempt (+ jitter) between attempts
    concurrency: int = 32  # in-flight requests per simulator
    cache: str | None = None  # SQLite reply cache file
    cache_mode: str | None = None  # None -> "read_write" if cache is set, else "off"

    def __post_init__(self) -> None:
        if self.cache_mode is None:  # resolved here so direct construction gets the same default
            object.__setattr__(self, "cache_mode", "read_write" if self.cache else "off")


_FIELDS = tuple(f.name for f in dataclasses.fields(UserSimConfig))
_INTS = {"max_tokens": 1, "retries": 0, "concurrency": 1}  # key -> minimum
_STRINGS = ("base_url", "model", "api_key_env", "cache")


def _fail(source: str, key: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"{source}: {SECTION}.{key}: {problem}; {fix}")


def _number(source: str, key: str, value: Any) -> float:
    # bool is an int subclass: `temperature: true` must not pass as 1.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(source, key, f"must be a number, got {type(value).__name__} {value!r}", "write a plain number")
    if not math.isfinite(value):
        raise _fail(source, key, f"must be finite, got {value!r}", "write a finite number")
    return float(value)


def _check_values(raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in _FIELDS:
            raise _fail(source, str(key), "unknown key", f"valid keys: {', '.join(_FIELDS)}")
        if key == "kind":
            if value not in KINDS:
                raise _fail(source, key, f"unknown kind {value!r}", f"use one of: {', '.join(KINDS)}")
        elif key == "cache_mode":
            if value is not None and value not in CACHE_MODES:
                raise _fail(source, key, f"unknown mode {value!r}", f"use one of: {', '.join(CACHE_MODES)}")
        elif key in _STRINGS:
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise _fail(source, key, f"must be a non-empty string, got {value!r}", "write a string or null")
        elif key in _INTS:
            if isinstance(value, bool) or not isinstance(value, int):
                raise _fail(
                    source, key, f"must be an integer, got {type(value).__name__} {value!r}", "write a whole number"
                )
            if value < _INTS[key]:
                raise _fail(source, key, f"must be >= {_INTS[key]}, got {value}", f"use at least {_INTS[key]}")
        else:  # temperature, timeout_s, backoff_s
            value = _number(source, key, value)
            if key == "temperature" and not 0.0 <= value <= 2.0:
                raise _fail(source, key, f"must be in [0, 2], got {value}", "use 0 (reproducible) to 2")
            if key == "timeout_s" and value <= 0:
                raise _fail(source, key, f"must be > 0, got {value}", "give seconds per HTTP call, e.g. 60")
            if key == "backoff_s" and value < 0:
                raise _fail(source, key, f"must be >= 0, got {value}", "give seconds, e.g. 1.0")
        out[key] = value
    return out


def _check_combination(cfg: UserSimConfig, raw: Mapping[str, Any], source: str) -> None:
    if cfg.kind == "openai":
        for key in ("base_url", "model"):
            if getattr(cfg, key) is None:
                raise _fail(source, key, "required when kind is 'openai'", f"set user_sim.{key}")
        assert cfg.base_url is not None
        if not cfg.base_url.startswith(("http://", "https://")):
            raise _fail(source, "base_url", f"not an http(s) URL: {cfg.base_url!r}", "e.g. http://127.0.0.1:8000/v1")
    if cfg.api_key_env is not None and cfg.api_key_env not in os.environ:
        raise _fail(
            source,
            "api_key_env",
            f"environment variable {cfg.api_key_env} is not set",
            "export it, or remove api_key_env for servers without a key",
        )
    # "off" without a cache is harmless; a mode that needs a cache file without one is a mistake.
    if raw.get("cache_mode") not in (None, "off") and cfg.cache is None:
        raise _fail(source, "cache_mode", f"{raw['cache_mode']!r} needs a cache file", "set user_sim.cache too")
    if cfg.cache_mode == "replay" and cfg.cache is not None and not Path(cfg.cache).is_file():
        raise _fail(
            source, "cache", f"replay needs an existing cache, {cfg.cache} not found", "run once with read_write"
        )


def load_user_sim_config(raw: Mapping[str, Any] | None, source: str) -> UserSimConfig:
    """The validated ``user_sim`` section ``raw`` (None or {} -> defaults); ``source`` names it in errors."""
    raw = raw if raw is not None else {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{source}: {SECTION}: must be a mapping of simulator settings, got {type(raw).__name__}; "
            f"write e.g. '{SECTION}: {{kind: scripted}}'"
        )
    cfg = UserSimConfig(**_check_values(raw, source))
    _check_combination(cfg, raw, source)
    return cfg


def user_sim_config_from_env(path: str | os.PathLike[str] | None = None) -> UserSimConfig:
    """The ``user_sim`` section of ``path`` (default ``$REWARDKIT_CONFIG``); a missing section means defaults."""
    loaded, source = read_config_file(path)
    return load_user_sim_config(loaded.get(SECTION), source)


def make_simulator(cfg: UserSimConfig) -> UserSimulator:
    """The simulator ``cfg`` describes, behind the reply cache when ``cfg.cache`` is set and not off."""
    # Re-checked: a UserSimConfig built directly (not loaded) skips load_user_sim_config.
    load_user_sim_config(dataclasses.asdict(cfg), "UserSimConfig")
    sim: UserSimulator
    if cfg.kind == "openai":
        # Imported here: the openai SDK takes a while to import and scripted runs never need it.
        from rewardkit.loop.user_sim.openai_sim import OpenAISimulator

        assert cfg.base_url is not None and cfg.model is not None
        sim = OpenAISimulator(
            cfg.base_url,
            cfg.model,
            api_key=os.environ[cfg.api_key_env] if cfg.api_key_env else "EMPTY",
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            timeout_s=cfg.timeout_s,
            retries=cfg.retries,
            backoff_s=cfg.backoff_s,
            concurrency=cfg.concurrency,
        )
    else:
        sim = ScriptedSimulator()
    if cfg.cache is not None and cfg.cache_mode != "off":
        sim = CachedSimulator(sim, cfg.cache, cfg.cache_mode)  # type: ignore[arg-type]
    return sim
