"""The ``user_sim`` config section: which simulator plays the customer, and how it is called.

Declared like the reward sections (:mod:`rewardkit.config`) and checked strictly and early (when the rollout
plugin is built), because a typo such as ``temprature`` or a NaN timeout would otherwise surface hours into a GRPO
run as silently wrong dialogues or as a hung rollout. The whole file's schema is
``rewardkit.loop.config.RUN_SCHEMA``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rewardkit.config import ConfigError, ConfigSchema, config_section, setting
from rewardkit.envs import Domain
from rewardkit.loop.user_sim.base import UserSimulator
from rewardkit.loop.user_sim.cache import CachedSimulator
from rewardkit.loop.user_sim.faulty import FaultySimulator
from rewardkit.loop.user_sim.scripted import PHRASES, ScriptedSimulator
from rewardkit.rewards.config import REFERENCE

if TYPE_CHECKING:
    from rewardkit.loop.endpoint import EndpointSettings

SECTION = "user_sim"
TIMEOUT_BASE_S = 30.0  # the default timeout: this, plus the time twice max_tokens take at TOKENS_PER_S
TOKENS_PER_S = 2.0
_STRINGS = ("base_url", "model", "api_key_env", "cache", "review_url", "review_model")


@config_section(SECTION)
@dataclass(frozen=True)
class UserSimConfig:
    """The user simulator of multi-turn rollouts (see recipes/agent/mua_rl_config.yaml)."""

    kind: Literal["scripted", "openai"] = setting(
        "scripted", "`scripted` (model-free, for CI) or `openai` (any OpenAI-compatible endpoint)."
    )
    base_url: str | None = setting(
        None, "The endpoint for `kind: openai`, e.g. http://127.0.0.1:8000/v1 (swift deploy, vLLM).", min_length=1
    )
    model: str | None = setting(None, "The model name the endpoint serves, for `kind: openai`.", min_length=1)
    api_key_env: str | None = setting(
        None,
        "Name of the environment variable that holds the API key; null sends `EMPTY` (local servers).",
        min_length=1,
    )
    temperature: float = setting(0.0, "Sampling temperature: 0 is reproducible.", minimum=0, maximum=2)
    max_tokens: int = setting(512, "Tokens per simulator reply.", minimum=1)
    prompt: Literal["transcript", "chat"] = setting(
        "transcript",
        "How a chat model sees the dialogue: `transcript` (one message holding the conversation, then who it is and "
        "what to write) or `chat` (tau2-bench's role-flipped chat, which small instruct models answer as the agent).",
    )
    timeout_s: float | None = setting(
        None,
        "Seconds per HTTP call; null: 30 plus 1 per token of max_tokens (a cut reply is asked for again with twice "
        "the tokens, which a 2 tokens/s endpoint such as a small model on CPU then still answers).",
        exclusive_minimum=0,
    )
    retries: int = setting(3, "Extra attempts after the first, on transient failures only.", minimum=0)
    backoff_s: float = setting(1.0, "Seconds of backoff: attempt n sleeps backoff_s * 2**n (plus jitter).", minimum=0)
    concurrency: int = setting(32, "Requests in flight at once, per simulator.", minimum=1)
    cache: str | None = setting(
        None, "SQLite file of replies by dialogue: a logged episode replays exactly offline.", min_length=1
    )
    cache_mode: Literal["off", "read_write", "replay"] | None = setting(
        None,
        "How the cache is used: `replay` needs an existing cache; null = `read_write` if `cache` is set, else `off`.",
    )

    review_url: str | None = setting(
        None,
        "An OpenAI-compatible endpoint whose model reviews the simulated user after the rules, in training (one "
        "call per episode the rules pass; it flags `model_review` with its reason); null: the rules only.",
        min_length=1,
    )
    review_model: str | None = setting(None, "The model name review_url serves.", min_length=1)

    fault_rate: float = setting(
        0.0,
        "For measuring the user review on your own setup only: the share of episodes whose simulated user makes one "
        "known mistake (a premature stop, a made-up fact, a role break, a wrong approval, the wrong language); 0 in "
        "real runs.",
        minimum=0,
        maximum=1,
    )
    fault_seed: int = setting(0, "Which episodes get a mistake, and of which kind, when fault_rate is above 0.")

    def __post_init__(self) -> None:
        if self.cache_mode is None:  # resolved here so direct construction gets the same default
            object.__setattr__(self, "cache_mode", "read_write" if self.cache else "off")

    def call_timeout_s(self) -> float:
        """``timeout_s``, or (null) the time a reply of up to twice ``max_tokens`` takes at 2 tokens/s, plus 30 s."""
        return self.timeout_s if self.timeout_s is not None else TIMEOUT_BASE_S + self.max_tokens / TOKENS_PER_S * 2

    def endpoint(self) -> EndpointSettings:
        """How the simulator's endpoint is called: the key (from ``api_key_env``), timeout, retries, backoff and
        concurrency."""
        from rewardkit.loop.endpoint import EndpointSettings  # the openai SDK: only LLM users need it

        key = os.environ[self.api_key_env] if self.api_key_env else "EMPTY"
        return EndpointSettings(
            api_key=key,
            timeout_s=self.call_timeout_s(),
            retries=self.retries,
            backoff_s=self.backoff_s,
            concurrency=self.concurrency,
        )

    @staticmethod
    def check(raw: Mapping[str, Any]) -> tuple[str, str] | None:
        for key in _STRINGS:
            if isinstance(raw.get(key), str) and not raw[key].strip():
                return key, f"must be a non-empty string, got {raw[key]!r}; write a string or null"
        if raw.get("kind") == "openai":
            for key in ("base_url", "model"):
                if raw.get(key) is None:
                    return key, f"required when kind is 'openai'; set user_sim.{key}"
            if not raw["base_url"].startswith(("http://", "https://")):
                return "base_url", f"not an http(s) URL: {raw['base_url']!r}; e.g. http://127.0.0.1:8000/v1"
        if raw.get("review_url") is not None:
            if raw.get("review_model") is None:
                return "review_model", "required with review_url; set user_sim.review_model"
            if not raw["review_url"].startswith(("http://", "https://")):
                return "review_url", f"not an http(s) URL: {raw['review_url']!r}; e.g. http://127.0.0.1:8001/v1"
        name = raw.get("api_key_env")
        if name is not None and name not in os.environ:
            return "api_key_env", (
                f"environment variable {name} is not set; export it, or remove api_key_env for servers without a key"
            )
        # "off" without a cache is harmless; a mode that needs a cache file without one is a mistake.
        mode, cache = raw.get("cache_mode"), raw.get("cache")
        if mode not in (None, "off") and cache is None:
            return "cache_mode", f"{mode!r} needs a cache file; set user_sim.cache too"
        if mode == "replay" and cache is not None and not Path(cache).is_file():
            return "cache", f"replay needs an existing cache, {cache} not found; run once with read_write"
        return None


# The section alone (RUN_SCHEMA, in rewardkit.loop.config, holds the whole file and imports this module).
_SCHEMA = ConfigSchema(sections=(UserSimConfig,), reference=REFERENCE)


def load_user_sim_config(raw: Mapping[str, Any] | None, source: str) -> UserSimConfig:
    """The validated ``user_sim`` section ``raw`` (None or {} -> defaults); ``source`` names it in errors."""
    return _SCHEMA.section(UserSimConfig, raw, source)


def make_simulator(cfg: UserSimConfig, domain: Domain) -> UserSimulator:
    """The simulator ``cfg`` describes for the users of ``domain``, behind the reply cache when ``cfg.cache`` is set
    and not off. A chat model plays the user by the domain's guidelines: a domain without them cannot have one."""
    # Re-checked: a UserSimConfig built directly (not loaded) skips load_user_sim_config.
    load_user_sim_config(dataclasses.asdict(cfg), "UserSimConfig")
    sim: UserSimulator
    if cfg.kind == "openai":
        if domain.guidelines is None:
            raise ConfigError(
                f"user_sim.kind 'openai': domain {domain.name!r} declares no simulator guidelines (Domain.guidelines, "
                "how a chat model plays its user); declare them, or use the scripted user"
            )
        # Imported here: the openai SDK takes a while to import and scripted runs never need it.
        from rewardkit.loop.user_sim.openai_sim import OpenAISimulator

        assert cfg.base_url is not None and cfg.model is not None
        sim = OpenAISimulator(
            cfg.base_url,
            cfg.model,
            guidelines=domain.guidelines(),
            settings=cfg.endpoint(),
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            prompt=cfg.prompt,
        )
    else:
        if domain.language not in PHRASES:  # found here, not at the second user turn of a training run
            raise ConfigError(
                f"user_sim.kind 'scripted': domain {domain.name!r} speaks {domain.language!r}, and the scripted user "
                f"speaks {', '.join(PHRASES)}; use an LLM user (user_sim.kind: openai)"
            )
        sim = ScriptedSimulator()
    if cfg.cache is not None and cfg.cache_mode != "off":
        sim = CachedSimulator(sim, cfg.cache, cfg.cache_mode)  # type: ignore[arg-type]
    if cfg.fault_rate > 0:  # outside the cache: a cached honest reply can still be made wrong
        sim = FaultySimulator(sim, rate=cfg.fault_rate, seed=cfg.fault_seed)
    return sim
