"""The ``rollout:`` and ``diagnostics:`` sections of ``$REWARDKIT_CONFIG`` (when an episode, or a run, must stop),
and the whole file.

:data:`RUN_SCHEMA` is every section of the file: the rewards' (``rewardkit.rewards.registry.config_schema()``, which
accepts ``user_sim``, ``rollout`` and ``diagnostics`` as any mapping) plus those three, checked key by key. The
example file ``recipes/planning/reward_config.yaml`` and the key table of ``docs/config.md`` are generated from it
(``rewardkit config example|table|check``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from rewardkit.config import Config, ConfigSchema, config_section, setting
from rewardkit.envs.access import TOKEN_ENV
from rewardkit.loop.user_sim.config import UserSimConfig
from rewardkit.rewards.config import REFERENCE
from rewardkit.rewards.registry import config_schema


@config_section("rollout")
@dataclass(frozen=True)
class RolloutLimits:
    """When a multi-turn episode stops, besides the user's and the agent's own stop signals."""

    max_turns: int = setting(
        30, "Assistant turns per episode (MUA-RL: 30); ms-swift's --max_turns, when set, wins.", minimum=1
    )
    token_budget: int = setting(16384, "Tokens the policy may sample over the whole episode.", minimum=1)
    error_budget: int = setting(
        10, "Tool results with an error code (schema violations included) per episode.", minimum=1
    )
    user_review: Literal["exclude", "count", "off"] | None = setting(
        None,
        "What an episode the user review flags does (a premature stop, a fact the user was never given, a role "
        "break, an approval against its scenario, the wrong language): `exclude` ends it as `user_sim_mistake`, left "
        "out of training like a simulator failure; `count` keeps it scored and records its flags; `off` reviews "
        "nothing; null: `exclude` in training, `count` in synthesis and evaluation.",
    )
    max_failed_share: float = setting(
        0.5,
        "If more than this share of a batch's episodes end in `user_sim_error`, training stops with a message "
        "naming the simulator endpoint.",
        minimum=0,
        maximum=1,
    )
    env_servers: tuple[str, ...] = setting(
        (),
        "Base URLs of `rewardkit env serve --openenv` servers: the training scheduler runs each episode on one of "
        "them, in turn, instead of in its own process (their token, if any, from $REWARDKIT_SERVE_TOKEN); empty: "
        "in process.",
        item_min_length=1,
    )
    env_timeout_s: float = setting(
        600.0,
        "Seconds a remote environment server may take to answer one step (its simulator's and reviewer's calls "
        "included: the simulator's timeout times its attempts, at least); a server slower than this ends the "
        "episode as env_error.",
        exclusive_minimum=0,
    )

    @staticmethod
    def check(raw: Mapping[str, Any]) -> tuple[str, str] | None:
        for i, url in enumerate(raw.get("env_servers") or ()):
            problem = env_server_problem(url)
            if problem is not None:
                return f"env_servers[{i}]", problem
        return None


# What the remote episode opens its WebSocket on: ws(s) as given, http(s) as ws(s); "/ws" is appended to the path.
ENV_SERVER_SCHEMES = ("ws", "wss", "http", "https")


def env_server_problem(url: str) -> str | None:
    """Why ``url`` cannot be an environment server's base URL (a scheme of :data:`ENV_SERVER_SCHEMES`, a host, a
    port if not the scheme's own; a path may follow, but no query or fragment: the WebSocket's "/ws" goes after the
    path; no blank or control character, which urlsplit drops but a connection would not; no user or password:
    the servers read a bearer token, and a log would show it), else None. The message never shows a password."""
    shown = re.sub(r"(?<=//)[^/?#]*@", "…@", url)  # the user information: up to the host's last "@"
    try:
        parts = urlsplit(url)
        usable = parts.scheme in ENV_SERVER_SCHEMES and bool(parts.hostname) and parts.port != 0
        usable = usable and not (parts.query or parts.fragment) and url.isprintable() and " " not in url
    except ValueError:  # a port that is not a number, or past 65535; a bracketed host that is no IPv6 address
        usable = False
    if not usable:
        return (
            f"{shown!r} is not a server's base URL: write ws://, wss://, http:// or https://HOST[:PORT], a path after "
            "it if the server is behind one (no query or fragment), e.g. http://10.0.0.5:8000"
        )
    if shown != url:
        return (
            f"{shown!r} holds a user or password, which the servers do not read: drop it, and give their token in "
            f"${TOKEN_ENV} (sent as a bearer token)"
        )
    return None


def env_server_ws(url: str) -> str:
    """The WebSocket the episode opens for ``url`` (a base URL :func:`env_server_problem` accepts): its scheme, read
    case-blind, with http(s) as ws(s), and "/ws" after its path."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)  # urlsplit lowers the scheme
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + "/ws", "", ""))


@config_section("diagnostics")
@dataclass(frozen=True)
class DiagnosticsLimits:
    """What the live GRPO diagnostics (``--callbacks rewardkit_diagnostics``) warn on, stop on, and send to trackers."""

    zero_variance_warn: float = setting(
        0.5,
        "Warn when more than this share of a step's groups have no variance in the total (no gradient).",
        minimum=0,
        maximum=1,
    )
    zero_variance_stop: float | None = setting(
        None,
        "Stop the run when more than this share of the groups have no variance `patience` steps in a row; null: never.",
        minimum=0,
        maximum=1,
    )
    none_rate_warn: float = setting(
        0.5, "Warn when a reward returns None for more than this share of a step's completions.", minimum=0, maximum=1
    )
    none_rate_stop: float | None = setting(
        None,
        "Stop the run when a reward's None rate is above this `patience` steps in a row; null: never.",
        minimum=0,
        maximum=1,
    )
    patience: int = setting(3, "Steps in a row a stop threshold must be passed before the run stops.", minimum=1)
    sample_episodes: int = setting(
        4,
        "Multi-turn runs: how many of a step's episodes (the transcript, each reward's score, the reward's checks and "
        "why it scored so) go to each tracker of ms-swift's --report_to: TensorBoard text, a wandb table; 0: none.",
        minimum=0,
        maximum=64,
    )
    sample_every: int | None = setting(
        None, "Send those episodes every this many steps; null: at each logging step (--logging_steps).", minimum=1
    )


RUN_SCHEMA = ConfigSchema(
    shared=config_schema().shared,
    sections=(*config_schema().sections, UserSimConfig, RolloutLimits, DiagnosticsLimits),
    reference=REFERENCE,
)


def load_run_config(
    overrides: Mapping[str, Any] | None = None,
    path: str | os.PathLike[str] | None = None,
    *,
    flags: Mapping[str, tuple[str, Any]] | None = None,
) -> Config:
    """The whole file (``path`` or ``$REWARDKIT_CONFIG``) <- ``overrides`` <- ``flags`` (dotted key -> (flag,
    value): the options a user gave, which win), every section checked: ``cfg.user_sim``, ``cfg.rollout`` and the
    rewards' sections; ``cfg.origin(key)`` names each value's source."""
    return RUN_SCHEMA.load(overrides, path, flags=flags)
