"""``rewardkit synth agent``: verified multi-turn tool-use trajectories as ms-swift SFT rows (a cold start).

``add_parsers(sub)`` adds ``synth``; its handler is ``cmd_synth_agent``. The run options it shares with
``eval agent`` are declared here once (``_add_run_options``) and mapped onto a
:class:`~rewardkit.runs.episodes.spec.RunSpec` (``_run_spec``); ``rewardkit.cli.eval`` uses both.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rewardkit.cli.env import DOMAIN_HELP
from rewardkit.cli.lint import _number
from rewardkit.config import ENV_VAR
from rewardkit.envs import get_domain
from rewardkit.envs.termination import Termination
from rewardkit.files.outputs import check_outputs
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.ledger import ledger_lines
from rewardkit.loop.user_sim.config import UserSimConfig
from rewardkit.runs.episodes.episode_log import RunError
from rewardkit.runs.episodes.spec import RULES, RunSpec, check_options, task_ids
from rewardkit.runs.episodes.trials import resume_hint

if TYPE_CHECKING:
    from rewardkit.runs.episodes.judging import JudgeOptions


REAL_MODEL_USER = "real-model"  # --user: the real small model, converted if need be and served for the run
REAL_MODEL_TOKENS = 48  # its replies' default cap: a customer's message fits, and a reply costs ~12 s on two cores


@contextlib.contextmanager
def _real_user(spec: RunSpec) -> Iterator[RunSpec]:
    """``--user real-model``: SmolLM2-135M-Instruct (converted once, :mod:`rewardkit.pipelines.real_model`) served
    by ``swift deploy`` for the length of the run, and ``spec`` with its URL as the user; any other ``spec`` as it
    is."""
    if spec.user != REAL_MODEL_USER:
        yield spec
        return
    if spec.user_model is not None:
        raise RunError(f"--user-model {spec.user_model!r}: --user real-model serves its own model; leave it out")
    check_options(spec)  # a bad option fails now, not after the model is converted and served
    from rewardkit.pipelines.real_model import build_real_model, served

    folder = build_real_model()
    log = folder.parent / f"{folder.name}.deploy.log"
    print(f"--user real-model: serving {folder} with swift deploy (its log: {log})", file=sys.stderr)
    with served(folder, log, "smollm2") as url:
        tokens = spec.user_max_tokens if spec.user_max_tokens is not None else REAL_MODEL_TOKENS
        yield dataclasses.replace(spec, user=url, user_model="smollm2", user_max_tokens=tokens)


def _add_sampling(who: argparse._ArgumentGroup) -> None:
    """How the agent samples (RunSpec's temperature, top_k, top_p and seed_base)."""
    d = RunSpec
    who.add_argument(
        "--temperature",
        type=float,
        default=d.temperature,
        help=f"the agent's sampling temperature (default {d.temperature:g})",
    )
    who.add_argument("--top-k", type=int, help="sample from the k likeliest tokens (default: all)")
    who.add_argument("--top-p", type=float, default=d.top_p, help=f"nucleus sampling (default {d.top_p:g}: off)")
    who.add_argument(
        "--seed-base",
        type=int,
        default=d.seed_base,
        help="a checkpoint's random stream (default 0, every evaluation's: models pair up)",
    )


def _add_run_options(p: argparse.ArgumentParser, split: str, trials: int) -> None:
    """The flags of a :class:`RunSpec`; its defaults are theirs, but for ``--split`` and ``--trials``. A user or
    loop flag defaults to None: left out, the config file's value (or the key's default) stands."""
    d, u, r = RunSpec, UserSimConfig, RolloutLimits  # frozen dataclasses keep each field's default as a class attribute
    who = p.add_argument_group("agent and user")
    who.add_argument("--agent", required=True, help="gold, an http(s):// OpenAI-compatible URL, or a model directory")
    who.add_argument("--agent-model", help="model name at --agent URL (default: the one model it serves)")
    _add_sampling(who)
    who.add_argument("--max-tokens", type=int, default=d.max_tokens, help="the agent's tokens per message")
    who.add_argument(
        "--agent-retries", type=int, default=d.agent_retries, help="extra attempts per agent call (URL agents)"
    )
    who.add_argument("--agent-timeout", type=float, default=d.agent_timeout, help="seconds per agent call (URL agents)")
    who.add_argument(
        "--user",
        help=f"scripted, real-model (SmolLM2-135M served for the run), or an http(s):// URL of a chat model "
        f"(default: user_sim, {u.kind})",
    )
    who.add_argument("--user-model", help="model name at --user URL (default: the one model it serves)")
    who.add_argument(
        "--user-retries", type=int, help=f"extra attempts per simulator call (default: user_sim.retries, {u.retries})"
    )
    who.add_argument(
        "--user-timeout",
        type=float,
        help="seconds per simulator call (default: user_sim.timeout_s; null: 30 plus 1 per token of max_tokens)",
    )
    who.add_argument(
        "--user-max-tokens",
        type=int,
        help=f"tokens per simulator reply (default: user_sim.max_tokens, {u.max_tokens}; {REAL_MODEL_TOKENS} with "
        "--user real-model)",
    )
    who.add_argument("--user-cache", type=Path, help="SQLite reply cache for the simulator (default: user_sim.cache)")
    who.add_argument(
        "--config",
        type=Path,
        metavar="CONFIG.yaml",
        help="the run's user_sim and rollout sections; a flag given wins (default: $REWARDKIT_CONFIG)",
    )
    what = p.add_argument_group("tasks and loop")
    what.add_argument("--domain", default="retail", help=DOMAIN_HELP + " (default: retail)")
    what.add_argument("--mcp", metavar="SERVER", help="take the tools from this MCP server (command line or URL)")
    sim = p.add_argument_group("simulated tools (a domain given as a spec: docs/simulated_tools.md)")
    sim.add_argument(
        "--tools",
        choices=("real", "simulated"),
        default="real",
        help="simulated: answer every call from the task's memory database (default real)",
    )
    sim.add_argument("--tool-model", metavar="URL", help="a tool LLM answers the calls (default: each tool's rule)")
    sim.add_argument("--tool-model-name", help="model name at --tool-model (default: the one model it serves)")
    sim.add_argument(
        "--memory-model",
        metavar="URL",
        help="an LLM writes each task's memory (default: its own memory, else the seed)",
    )
    sim.add_argument(
        "--sim-cache",
        type=Path,
        metavar="SQLITE",
        help="store the tool and memory models' answers here: a rerun replays them",
    )
    what.add_argument("--split", help=f"task split (default {split}; with --task-file, all)")
    what.add_argument(
        "--task-file",
        type=Path,
        metavar="TASKS.json",
        help="play these tasks (rewardkit tasks generate's output) instead of the domain's",
    )
    p.set_defaults(default_split=split)
    what.add_argument("--tasks", help="comma-separated task ids within the split")
    what.add_argument("--limit", type=int, help="only the first N tasks of the split")
    what.add_argument("--trials", type=int, default=trials, help=f"episodes per task (default {trials})")
    what.add_argument("--system-prompt", type=Path, help="the agent's system prompt (default: the domain's policy)")
    what.add_argument(
        "--no-tools", action="store_true", help="send no tool specs, write no tools column (the system prompt has them)"
    )
    what.add_argument(
        "--max-turns", type=int, help=f"agent turns per episode (default: rollout.max_turns, {r.max_turns})"
    )
    what.add_argument(
        "--rule", choices=RULES, default=d.rule, help="task completion: tau2 (state and outputs) or mua-rl (state only)"
    )
    run = p.add_argument_group("run")
    run.add_argument("--workers", type=int, default=d.workers, help=f"episodes in flight (default {d.workers})")
    run.add_argument("--resume", action="store_true", help="continue the episode log; rerun failed infrastructure")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_price(run)


def _add_price(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--price PROMPT COMPLETION``: what the ledger's tokens cost (synth, eval and audit alike)."""
    p.add_argument(
        "--price",
        nargs=2,
        type=_number(0.0, 1e6),
        metavar=("PROMPT", "COMPLETION"),
        help="USD per million prompt and completion tokens: the model endpoints' cost",
    )


def _run_inputs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Every file a synth or eval run reads, so that no output can be one of them: the prompt, the domain's
    bundled data, the config file and the simulator's reply cache (read before it is written)."""
    found = [("--system-prompt", args.system_prompt)] if args.system_prompt else []
    if args.config or os.environ.get(ENV_VAR):
        found.append(("--config", args.config) if args.config else (f"${ENV_VAR}", Path(os.environ[ENV_VAR])))
    found += list(get_domain(args.domain).input_files())
    found += [("--sim-cache", args.sim_cache)] if args.sim_cache else []
    found += [("--task-file", args.task_file)] if args.task_file else []
    return found + ([("--user-cache", args.user_cache)] if args.user_cache else [])


def _run_spec(args: argparse.Namespace) -> RunSpec:
    """The flags of ``_add_run_options`` as a RunSpec (``--resume`` and ``--no-progress`` are the command's)."""
    tasks = task_ids(args.tasks)  # --tasks ' , ' names no task: an error, not the whole split
    return RunSpec(
        agent=args.agent,
        agent_model=args.agent_model,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed_base=args.seed_base,
        max_tokens=args.max_tokens,
        agent_retries=args.agent_retries,
        agent_timeout=args.agent_timeout,
        user=args.user,
        user_model=args.user_model,
        user_retries=args.user_retries,
        user_timeout=args.user_timeout,
        user_max_tokens=args.user_max_tokens,
        user_cache=args.user_cache,
        config=args.config,
        domain=args.domain,
        mcp=args.mcp,
        simulated=args.tools == "simulated",
        tool_model=args.tool_model,
        tool_model_name=args.tool_model_name,
        memory_model=args.memory_model,
        sim_cache=args.sim_cache,
        split=args.split or ("all" if args.task_file else args.default_split),
        task_file=args.task_file,
        tasks=tasks,
        limit=args.limit,
        trials=args.trials,
        system_prompt=args.system_prompt,
        tools=not args.no_tools,
        max_turns=args.max_turns,
        rule=args.rule,
        workers=args.workers,
        price=tuple(args.price) if args.price else None,
    )


@contextlib.contextmanager
def _resume_hint() -> Iterator[None]:
    """A run stopped part-way (Ctrl-C, SIGTERM, a full disk) ends its one line with the ``--resume`` hint."""
    try:
        yield
    except BaseException as exc:
        if (hint := resume_hint(exc)) is not None:
            exc.add_note(hint)
        raise


def _servers_failed(terminations: Mapping[str, int], episodes: int, log: Path) -> None:
    """Fail a run whose every episode ended ``env_error``: its environment servers (``rollout.env_servers``, or
    ``--mcp``) failed or were never reached, and nothing was scored; exit 0 with a ``--resume`` hint would pass it
    for a run. Called once the report is written."""
    if episodes and terminations.get(Termination.ENV_ERROR.value, 0) == episodes:
        raise RunError(
            f"all {episodes} episode(s) ended env_error: the environment servers (rollout.env_servers, or --mcp) "
            f"failed or could not be reached, so nothing was scored; each episode's error is in {log}. Start them, "
            "or fix their addresses, then rerun with --resume"
        )


def _retry_hint(infrastructure: int, judge_errors: int = 0) -> None:
    if infrastructure:
        print(
            f"{infrastructure} episode(s) hit an infrastructure error; rerun with --resume to retry them",
            file=sys.stderr,
        )
    if judge_errors:
        print(
            f"{judge_errors} trajectory(ies) got no valid verdict from the judge (judge_error); rerun with --resume "
            "to judge them again (no episode is rerun for it)",
            file=sys.stderr,
        )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    synth = sub.add_parser("synth", help="synthesise SFT trajectories by running agent, simulated user and tools")
    actions = synth.add_subparsers(dest="action", required=True)
    agent = actions.add_parser(
        "agent",
        help="episodes of an agent on a domain; keep those task_completion scores 1.0",
        description="Run --trials episodes per task of --split (agent <-> simulated user <-> database), keep "
        "the ones task_completion scores 1.0, and write them as ms-swift agent-format SFT rows. Every "
        "episode is logged as it ends (--episodes); --resume continues a run and retries failed "
        "infrastructure.",
    )
    _add_run_options(agent, split="train", trials=1)
    out = agent.add_argument_group("outputs")
    out.add_argument("--out", type=Path, required=True, metavar="SFT.jsonl", help="the kept rows")
    out.add_argument("--report", type=Path, metavar="REPORT.json", help="counts per task and per reason")
    out.add_argument("--episodes", type=Path, help="the episode log (default: OUT with .episodes.jsonl)")
    out.add_argument(
        "--verdicts",
        type=Path,
        metavar="VERDICTS.json",
        help="keep only the trajectories a person accepted (rewardkit view --review)",
    )
    _add_judge_options(agent)
    agent.set_defaults(func=cmd_synth_agent)


def _add_judge_options(p: argparse.ArgumentParser) -> None:
    judge = p.add_argument_group("judge")
    judge.add_argument(
        "--judge", metavar="URL", help="a model judges each trajectory the rules pass; keep only its accepts"
    )
    judge.add_argument("--judge-model", help="model name at --judge (default: the one model it serves)")
    judge.add_argument(
        "--judge-cache", type=Path, metavar="SQLITE", help="store the judge's verdicts here: a rerun replays them"
    )
    judge.add_argument(
        "--judge-retries", type=int, help="extra attempts per judge call on transport failures (default 3)"
    )


def _judge_options(args: argparse.Namespace) -> JudgeOptions | None:
    """``--judge`` and its options; one of them without ``--judge`` is an error naming it."""
    if args.judge is None:
        given = [f for f in ("judge_model", "judge_cache", "judge_retries") if getattr(args, f) is not None]
        if given:
            raise RunError(f"--{given[0].replace('_', '-')} configures the judge: add --judge URL")
        return None
    from rewardkit.runs.episodes.judging import JudgeOptions

    retries = JudgeOptions.retries if args.judge_retries is None else args.judge_retries
    return JudgeOptions(args.judge, args.judge_model, args.judge_cache, retries)


def cmd_synth_agent(args: argparse.Namespace) -> int:
    from rewardkit.runs.episodes.judging import judge_errors
    from rewardkit.runs.episodes.synthesis import headline, infrastructure_errors, synthesize_run

    judge = _judge_options(args)
    inputs = _run_inputs(args) + ([("--verdicts", args.verdicts)] if args.verdicts else [])
    inputs += [("--judge-cache", args.judge_cache)] if args.judge_cache else []
    check_outputs(inputs, [("--out", args.out)])  # first: a directory has no name to derive the log's from
    episodes = args.episodes or args.out.with_suffix(".episodes.jsonl")
    report = ("--report", args.report) if args.report else None
    check_outputs(inputs, [("--out", args.out), report, ("--episodes", episodes)])
    with _real_user(_run_spec(args)) as spec, _resume_hint():
        report = synthesize_run(
            spec,
            args.out,
            args.report,
            episodes,
            resume=args.resume,
            progress=not args.no_progress,
            verdicts=args.verdicts,
            judge=judge,
        )
    _servers_failed(report["terminations"], report["read"], episodes)
    print(headline(report), file=sys.stderr)
    for line in ledger_lines(report["ledger"]):
        print(line, file=sys.stderr)
    if elsewhere := report.get("verdicts_on_another_episode"):
        print(
            f"--verdicts {args.verdicts}: {len(elsewhere)} verdict{'s' * (len(elsewhere) > 1)} given on another "
            f"episode with the same id, not applied: {', '.join(elsewhere)}; each counts as unreviewed",
            file=sys.stderr,
        )
    _retry_hint(infrastructure_errors(report), judge_errors(report))
    return 0
