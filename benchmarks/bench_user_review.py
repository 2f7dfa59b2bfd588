"""The user review's cost: its rules on a finished episode, against the episode's own CPU time, as a ratio in one run.

    python benchmarks/bench_user_review.py            # every retail task, best of 3
    python benchmarks/bench_user_review.py --quick    # 12 tasks, for CI: runs every path, asserts no figure

The episodes are the gold agent's against the scripted user, on private copies of the retail database: the loop's
whole CPU work without a model (the harness, the database, the scripted user, the episode's bookkeeping). Timed:
the episodes with ``rollout.user_review: off`` and with ``count`` (the rules run, nothing is excluded), and the
rules alone on the finished dialogues. In training the policy's sampling and the simulator's model add to each
rollout's time, so the share here is an upper bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from _timing import best_of, quick_flag

from rewardkit.envs import get_domain
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episodes
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_review import review
from rewardkit.loop.user_sim.base import GREETING, Turn
from rewardkit.loop.user_sim.scripted import ScriptedSimulator


def cpu(fn: Callable[[], object]) -> float:
    """Seconds of CPU this process spent in one call of ``fn``."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    quick = quick_flag(__doc__)
    domain = get_domain("retail")
    tasks = list(domain.tasks().values())[: 12 if quick else None]
    repeat = 1 if quick else 3

    def episodes(mode: str) -> list:
        limits = RolloutLimits(user_review=mode)  # type: ignore[arg-type]
        return run_episodes(domain, tasks, GoldAgent, ScriptedSimulator(), limits, workers=1)

    episodes("off")  # warm: the gold outcomes and the database template, cached per process
    off = min(cpu(lambda: episodes("off")) for _ in range(repeat))
    on = min(cpu(lambda: episodes("count")) for _ in range(repeat))
    results = episodes("count")
    dialogues = []
    for result in results:
        turns = [Turn("agent", GREETING)]
        for message in result.messages[1:]:
            text = message.get("content")
            if message["role"] in ("user", "assistant") and isinstance(text, str) and "<tool_call>" not in text:
                turns.append(Turn("user" if message["role"] == "user" else "agent", text))
        dialogues.append(turns)
    rules = best_of(lambda: [review(t, d, language="en") for t, d in zip(tasks, dialogues, strict=True)], repeat)
    n = len(tasks)
    print("| per episode | µs |\n|---|---:|")
    print(f"| the episode, review off (CPU) | {off / n * 1e6:.0f} |")
    print(f"| the episode, review on (CPU) | {on / n * 1e6:.0f} |")
    print(f"| the rules alone on its dialogue (wall) | {rules / n * 1e6:.0f} |")
    print(f"| the rules' share of an episode | {rules / off:.2%} |")


if __name__ == "__main__":
    main()
