"""Rollouts on remote environment servers against rollouts in process: 256 episodes at once, as a GRPO step runs them.

    REWARDKIT_OPENENV_PYTHON=.venv-openenv/bin/python python benchmarks/bench_remote_env.py   # make bench sets it
    python benchmarks/bench_remote_env.py --quick                                             # 16 episodes, for CI

Figures only, no thresholds. Every episode is a playable retail task played by the gold agent (no model: what is
timed is the environment, the user and the protocol) with the scripted user, 256 at once, in three ways:

- in process: ``run_episodes``, the database copies, tools and user in this process (the ``simulated_user``
  scheduler's default);
- on one and on two ``rewardkit env serve --openenv`` server processes (``rollout.env_servers``): this process only
  sends the agent's messages (:class:`~rewardkit.loop.remote_env.RemoteEpisode`, one thread each) and reads back
  what answers them.

For each: the wall time of the batch (the fastest of three), and the CPU seconds this process spent (the trainer's
share: what moves off the trainer's cores). The servers run in the OpenEnv stack (constraints/openenv.txt), named by
``$REWARDKIT_OPENENV_PYTHON``; without it the benchmark says so and measures nothing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from _timing import quick_flag

from rewardkit.envs import get_domain
from rewardkit.envs.task_verdict import task_verdict
from rewardkit.envs.termination import NATURAL
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episodes
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_sim.scripted import ScriptedSimulator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from openenv_servers import remote_play, served  # the tests' helpers: a server process, the gold agent on it

COMMAND = "python benchmarks/bench_remote_env.py"
RETAIL = get_domain("retail")
REPEAT = 3


def timed(batch: Callable[[], Sequence[str]]) -> tuple[float, float, list[str]]:
    """The fastest of :data:`REPEAT` runs: wall seconds, this process's CPU seconds, the endings."""
    best: tuple[float, float, list[str]] | None = None
    for _ in range(REPEAT):
        wall, cpu = time.perf_counter(), time.process_time()
        endings = list(batch())
        run = (time.perf_counter() - wall, time.process_time() - cpu, endings)
        best = run if best is None or run[0] < best[0] else best
    assert best is not None
    return best


def main() -> None:
    quick = quick_flag(__doc__)
    episodes = 16 if quick else 256
    print(f"$ {COMMAND}{' --quick' if quick else ''}")
    python = os.environ.get("REWARDKIT_OPENENV_PYTHON")
    if python is None:
        print("no OpenEnv stack: set $REWARDKIT_OPENENV_PYTHON (make bench builds .venv-openenv and sets it)")
        return
    playable = [t for t in RETAIL.tasks().values() if task_verdict("retail", t).playable]
    tasks = [playable[i % len(playable)] for i in range(episodes)]

    def in_process() -> list[str]:
        results = run_episodes(RETAIL, tasks, GoldAgent, ScriptedSimulator(), RolloutLimits(), workers=episodes)
        return [str(r.infos.termination) for r in results]

    rows = [("in process", timed(in_process))]
    logs = Path(os.environ.get("TMPDIR", "/tmp"))
    with ExitStack() as stack:
        flags = ("--max-sessions", "512")
        urls = [stack.enter_context(served(logs, "retail", *flags, python=python))[0] for _ in range(2)]
        for n in (1, 2):

            def remote(n: int = n) -> list[str]:
                with ThreadPoolExecutor(episodes) as pool:  # one thread an episode, as the scheduler's hooks
                    played = pool.map(lambda i: remote_play(urls[i % n], tasks[i]), range(episodes))
                    return [str(episode.infos().termination) for episode in played]

            remote()  # warm-up: each server's template and gold outcomes
            rows.append((f"on {n} server process{'es' if n > 1 else ''}", timed(remote)))
    print(f"\n### {episodes} gold-agent episodes at once, scripted user: in process and on `env serve --openenv`\n")
    print("| where the episodes run | wall s | episodes/s | this process's CPU s | natural endings |")
    print("|---|---:|---:|---:|---:|")
    for name, (wall, cpu, endings) in rows:
        natural = sum(e in NATURAL for e in endings)
        print(f"| {name} | {wall:.2f} | {episodes / wall:.0f} | {cpu:.2f} | {natural} of {len(endings)} |")


if __name__ == "__main__":
    main()
