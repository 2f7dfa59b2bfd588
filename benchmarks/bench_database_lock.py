"""A batch of rollouts with their database calls taking turns under one lock, against each environment's own lock.

    python benchmarks/bench_database_lock.py            # 256 episodes, 6 batches each way; about 30 s
    python benchmarks/bench_database_lock.py --quick    # 16 episodes, 50 ms replies: for CI, no figure to read

SQLite releases the interpreter lock around every statement; with hundreds of rollout threads, each release hands
the interpreter to another thread, which then asks for it back. ``DATABASE_LOCK`` (rewardkit.envs.harness) makes
the environments' calls take turns. The batch is bench_multi_turn.py's in-process one (3 agent turns, a tool call,
a simulator sleeping 200 ms per reply); the two ways alternate batch by batch in one process, so that a change in
the machine's speed hits both, and the median batch of each is printed. CPU is the process's, both cores included.
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from pathlib import Path

from _timing import quick_flag
from bench_multi_turn import RETAIL, Sleeper, TwoTexts, _tasks

from rewardkit.envs.harness import CallingEnvironment
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episodes


def own_lock(db_path: str | Path | None) -> CallingEnvironment:
    """A retail environment with a lock of its own, as every environment had before ``DATABASE_LOCK``."""
    env = RETAIL.make_env(db_path)
    env.lock = threading.RLock()
    return env


def main() -> None:
    quick = quick_flag(__doc__)
    episodes, delay_s, rounds = (16, 0.05, 2) if quick else (256, 0.2, 6)
    tasks, sleeper = _tasks(episodes), Sleeper(delay_s)
    ways = {"each environment's own lock": dataclasses.replace(RETAIL, make_env=own_lock), "DATABASE_LOCK": RETAIL}
    run_episodes(RETAIL, tasks, TwoTexts, sleeper, RolloutLimits(), workers=episodes)  # template, gold outcomes
    timings: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way, domain in ways.items():
            wall, cpu = time.perf_counter(), time.process_time()
            run_episodes(domain, tasks, TwoTexts, sleeper, RolloutLimits(), workers=episodes)
            timings[way].append((time.perf_counter() - wall, time.process_time() - cpu))
    print(f"$ python benchmarks/bench_database_lock.py{' --quick' if quick else ''}\n")
    print(f"{episodes} episodes at once, a simulator sleeping {delay_s * 1e3:.0f} ms; the median of {rounds} batches\n")
    print("| database calls | wall s | CPU s |\n|---|---:|---:|")
    for way, runs in timings.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"| {way} | {wall:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
