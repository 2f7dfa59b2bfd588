"""Rollouts on remote environment servers against rollouts in process, and rewardkit's own client against ms-swift's
own OpenEnv scheduler: 256 episodes at once, as a GRPO step runs them.

    .venv-swift46/bin/python benchmarks/bench_remote_env.py           # make bench runs it so
    .venv-swift46/bin/python benchmarks/bench_remote_env.py --quick   # 16 episodes, for CI

Figures only, no thresholds. Every episode is a playable retail task played by the gold agent (no model: what is
timed is the environment, the user and the protocol) with the scripted user. Each batch runs whole rollouts under
ms-swift's own multi-turn driver (``run_multi_turn``, as the GRPO trainer runs it in colocate mode), the gold agent
in the engine's place, through a scheduler:

- in process: the ``simulated_user`` scheduler, the database copies, tools and user in this process;
- own client: the same scheduler with ``rollout.env_servers`` (:class:`~rewardkit.loop.remote_env.RemoteEpisode`);
- ms-swift's OpenEnv scheduler: ``rewardkit_openenv`` (``plugins/openenv_scheduler.py``), OpenEnv's own client
  through ms-swift's ``OpenEnvWrapper``, each row's ``env_config`` naming its server;

each remote path on one and on two ``rewardkit env serve --openenv`` server processes. For each: the wall time of
the batch (the fastest of three), and the CPU seconds this process spent (the trainer's share: what moves off the
trainer's cores). It needs ms-swift 4.6 and the ``openenv`` package in one stack (constraints/swift-4.6.txt);
elsewhere it says so and measures nothing.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from _timing import quick_flag

from rewardkit.envs import get_domain
from rewardkit.envs.task_verdict import task_verdict
from rewardkit.envs.termination import NATURAL
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_sim.scripted import ScriptedSimulator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from openenv_servers import served  # the tests' helper: a server process

COMMAND = ".venv-swift46/bin/python benchmarks/bench_remote_env.py"
RETAIL = get_domain("retail")
REPEAT = 3
MAX_TURNS = 30


def timed(batch: Callable[[], list[str]]) -> tuple[float, float, list[str]]:
    """The fastest of :data:`REPEAT` runs: wall seconds, this process's CPU seconds, the endings."""
    best: tuple[float, float, list[str]] | None = None
    for _ in range(REPEAT):
        wall, cpu = time.perf_counter(), time.process_time()
        endings = batch()
        run = (time.perf_counter() - wall, time.process_time() - cpu, endings)
        best = run if best is None or run[0] < best[0] else best
    assert best is not None
    return best


def rollouts(scheduler: Any, rows: list[dict[str, Any]]) -> list[str]:
    """``rows`` through ``scheduler`` under ``run_multi_turn``, the gold agent of each row's task as the policy;
    each episode's ending."""
    from swift.infer_engine.protocol import (
        ChatCompletionResponse,
        ChatCompletionResponseChoice,
        ChatMessage,
        RequestConfig,
        RolloutInferRequest,
        RolloutOutput,
        UsageInfo,
    )
    from swift.rollout.agent_loop import invoke_async_hook, run_multi_turn

    requests = [
        RolloutInferRequest(messages=[dict(m) for m in row["messages"]], data_dict=row, uuid=f"r{i}")
        for i, row in enumerate(rows)
    ]
    agents = {r.uuid: GoldAgent(RETAIL.tasks()[row["task_id"]]) for r, row in zip(requests, rows, strict=True)}

    def policy(batch: list[Any], config: Any) -> list[Any]:  # the engine's place
        choices = [
            ChatCompletionResponseChoice(0, ChatMessage("assistant", agents[r.uuid](r.messages)), "stop") for r in batch
        ]
        return [
            RolloutOutput(response=ChatCompletionResponse(model="gold", usage=UsageInfo(0, 0, 0), choices=[c]))
            for c in choices
        ]

    invoke_async_hook(scheduler.on_trajectory_start(requests))
    outputs = run_multi_turn(requests, policy(requests, None), scheduler, policy, RequestConfig(), max_turns=MAX_TURNS)
    return [str(o.rollout_infos["termination"]) for o in outputs]


def main() -> None:
    quick = quick_flag(__doc__)
    episodes = 16 if quick else 256
    print(f"$ {COMMAND}{' --quick' if quick else ''}")
    if importlib.util.find_spec("openenv") is None or importlib.util.find_spec("swift") is None:
        print("needs ms-swift 4.6 and openenv in one stack: make bench runs it with .venv-swift46/bin/python")
        return
    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
    from rewardkit.plugins.openenv_scheduler import OpenEnvUserScheduler
    from rewardkit.plugins.scheduler import SimulatedUserScheduler

    built = build_tau2_grpo(Tau2Options(domain="retail", split="train", multi_turn=True))[0]
    built += build_tau2_grpo(Tau2Options(domain="retail", split="test", multi_turn=True))[0]
    by_id = {str(json.loads(r["task"])["id"]): r for r in built}
    playable = [t for t in by_id if task_verdict("retail", by_id[t]["task"]).playable]
    rows = [{**by_id[t], "task_id": t} for t in (playable[i % len(playable)] for i in range(episodes))]
    limits = RolloutLimits(max_turns=MAX_TURNS, user_review="count")
    schedulers: list[tuple[str, Callable[[], list[str]]]] = []
    in_process = SimulatedUserScheduler(simulator=ScriptedSimulator(), limits=limits, concurrency=episodes)
    schedulers.append(("in process (`simulated_user`)", lambda: rollouts(in_process, rows)))
    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        flags = ("--max-sessions", "512")
        urls = [stack.enter_context(served(logs, "retail", *flags))[0] for _ in range(2)]
        for n in (1, 2):
            own = SimulatedUserScheduler(
                simulator=ScriptedSimulator(),
                limits=dataclasses.replace(limits, env_servers=tuple(urls[:n])),
                concurrency=episodes,
            )
            schedulers.append(
                (f"own client (`rollout.env_servers`), {n} server{'s' * (n > 1)}", lambda s=own: rollouts(s, rows))
            )
            swift = OpenEnvUserScheduler(max_turns=MAX_TURNS, concurrency=episodes)
            served_rows = [{**r, "env_config": {"base_url": urls[i % n]}} for i, r in enumerate(rows)]
            schedulers.append(
                (
                    f"ms-swift's OpenEnv scheduler (`rewardkit_openenv`), {n} server{'s' * (n > 1)}",
                    lambda s=swift, r=served_rows: rollouts(s, r),
                )
            )
        results = []
        for name, batch in schedulers:
            batch()  # warm-up: each server's template and gold outcomes, each client's imports
            results.append((name, timed(batch)))
            print(f"{name}: {results[-1][1][0]:.2f} s", flush=True)
    print(f"\n### {episodes} gold-agent episodes at once, scripted user: in process and on `env serve --openenv`\n")
    print("| where the episodes run | wall s | episodes/s | this process's CPU s | natural endings |")
    print("|---|---:|---:|---:|---:|")
    for name, (wall, cpu, endings) in results:
        natural = sum(e in NATURAL for e in endings)
        print(f"| {name} | {wall:.2f} | {episodes / wall:.0f} | {cpu:.2f} | {natural} of {len(endings)} |")


if __name__ == "__main__":
    main()
