"""The options ``rewardkit synth`` and ``rewardkit eval`` share, and the run they describe.

Who plays the agent (``gold``, an OpenAI-compatible URL, or a local checkpoint), who plays the
user (``scripted`` or a URL), which domain and tasks, how many trials, the loop's limits; plus
the run's fingerprint, which a resumed log must match.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

from rewardkit.envs import Domain, domain_names, get_domain
from rewardkit.loop.agents import AgentError, make_agent_factory
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.user_sim.config import UserSimConfig, make_simulator
from rewardkit.runs.episode_log import RunError, TrialPlan, fingerprint, select_tasks


def add_run_options(p: argparse.ArgumentParser, split: str, trials: int) -> None:
    who = p.add_argument_group("agent and user")
    who.add_argument("--agent", required=True, help="gold, an http(s):// OpenAI-compatible URL, or a model directory")
    who.add_argument("--agent-model", help="model name at --agent URL (default: the one model it serves)")
    who.add_argument("--temperature", type=float, default=0.0, help="the agent's sampling temperature (default 0)")
    who.add_argument("--max-tokens", type=int, default=1024, help="the agent's tokens per message")
    who.add_argument("--agent-retries", type=int, default=3, help="extra attempts per agent call (URL agents)")
    who.add_argument("--agent-timeout", type=float, default=120.0, help="seconds per agent call (URL agents)")
    who.add_argument("--user", default="scripted", help="scripted, or an http(s):// URL of a chat model")
    who.add_argument("--user-model", help="model name at --user URL (default: the one model it serves)")
    who.add_argument("--user-retries", type=int, default=3, help="extra attempts per simulator call")
    who.add_argument("--user-timeout", type=float, default=60.0, help="seconds per simulator call")
    who.add_argument("--user-cache", type=Path, help="SQLite reply cache for the simulator")
    what = p.add_argument_group("tasks and loop")
    what.add_argument("--domain", default="retail", choices=domain_names())
    what.add_argument("--mcp", metavar="SERVER", help="take the tools from this MCP server (command line or URL)")
    what.add_argument("--split", default=split, help=f"task split (default {split})")
    what.add_argument("--tasks", help="comma-separated task ids within the split")
    what.add_argument("--limit", type=int, help="only the first N tasks of the split")
    what.add_argument("--trials", type=int, default=trials, help=f"episodes per task (default {trials})")
    what.add_argument("--system-prompt", type=Path, help="the agent's system prompt (default: the domain's policy)")
    what.add_argument("--no-tools", action="store_true",
                      help="send no tool specs, write no tools column (the system prompt has them)")  # fmt: skip
    what.add_argument("--max-turns", type=int, default=RolloutLimits.max_turns, help="agent turns per episode")
    what.add_argument("--rule", choices=("tau2", "mua-rl"), default="tau2",
                      help="task completion: tau2 (state and outputs) or mua-rl (state only)")  # fmt: skip
    run = p.add_argument_group("run")
    run.add_argument("--workers", type=int, default=8, help="episodes in flight (default 8)")
    run.add_argument("--resume", action="store_true", help="continue the episode log; rerun failed infrastructure")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")


def _domain(args: argparse.Namespace) -> Domain:
    if args.mcp is None:
        return get_domain(args.domain)
    try:
        from rewardkit.envs.mcp_domain import mcp_domain
    except ImportError as exc:
        raise RunError(f"--mcp needs the MCP SDK ({exc}); pip install 'rewardkit[mcp]'") from exc
    return mcp_domain(args.mcp, base=args.domain)


def _user(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    if args.user == "scripted":
        cfg = UserSimConfig(kind="scripted", cache=str(args.user_cache) if args.user_cache else None)
    elif args.user.startswith(("http://", "https://")):
        model = args.user_model or _only_model(args.user)
        cfg = UserSimConfig(
            kind="openai", base_url=args.user, model=model, retries=args.user_retries, timeout_s=args.user_timeout,
            backoff_s=0.5, concurrency=max(1, args.workers),
            cache=str(args.user_cache) if args.user_cache else None,
        )  # fmt: skip
    else:
        raise RunError(f"--user {args.user!r}: pass scripted or an http(s):// URL")
    sim = make_simulator(cfg)
    return sim, {"kind": cfg.kind, "base_url": cfg.base_url, "model": cfg.model, "fingerprint": sim.fingerprint()}


def _only_model(base_url: str) -> str:
    from rewardkit.loop.endpoint import only_model

    try:
        return only_model(base_url, "pass --user-model")
    except ValueError as exc:
        raise RunError(f"--user {base_url}: {exc}") from exc


def _check(args: argparse.Namespace) -> None:
    lows = {"trials": 1, "workers": 1, "max_tokens": 1, "max_turns": 1, "limit": 1, "agent_retries": 0,
            "user_retries": 0}  # fmt: skip
    for name, low in lows.items():
        value = getattr(args, name)
        if value is not None and value < low:
            raise RunError(f"--{name.replace('_', '-')} must be at least {low}, got {value}")


def build_plan(args: argparse.Namespace) -> tuple[TrialPlan, dict[str, Any]]:
    """The run the options describe, and its description (``meta["run"]`` is the fingerprint)."""
    _check(args)
    domain = _domain(args)
    system = args.system_prompt.read_text(encoding="utf-8") if args.system_prompt else None
    ids = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    tasks = select_tasks(domain, args.split, ids, args.limit)
    try:
        tools = [] if args.no_tools else domain.tool_specs()
        endpoint = {"retries": args.agent_retries, "timeout_s": args.agent_timeout, "concurrency": args.workers}
        make_agent, agent = make_agent_factory(
            args.agent,
            tools,
            model=args.agent_model,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            **(endpoint if args.agent.startswith(("http://", "https://")) else {}),
        )
    except AgentError as exc:
        raise RunError(str(exc)) from exc
    except ValueError as exc:
        raise RunError(str(exc)) from exc
    simulator, user = _user(args)
    limits = RolloutLimits(max_turns=args.max_turns)
    plan = TrialPlan(
        domain=domain, tasks=tasks, trials=args.trials, make_agent=make_agent, simulator=simulator, limits=limits,
        system=system, workers=args.workers, require_outputs=args.rule == "tau2",
    )  # fmt: skip
    prompt = system if system is not None else domain.policy()
    described = {
        "domain": domain.name, "split": args.split, "agent": agent, "user": user, "rule": args.rule,
        "system_prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest(), "tools": not args.no_tools,
        "limits": {"max_turns": limits.max_turns, "token_budget": limits.token_budget,
                   "error_budget": limits.error_budget},
    }  # fmt: skip
    return plan, {"run": fingerprint(described), **described, "trials": args.trials, "tasks": len(tasks)}
