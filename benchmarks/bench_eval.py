"""Evaluating a local checkpoint: what the loop costs next to the model's generation, one conversation per
generation (the former evaluation) against lockstep cohorts (``rewardkit eval agent`` now), in one run.

    python benchmarks/bench_eval.py            # 8 tasks x 8 sampled trials, cohorts of 32
    python benchmarks/bench_eval.py --quick    # 2 tasks x 2 trials, for CI: no figure to read

The agent is the tests' tiny Qwen3 taught to end its turns (tests/_tiny_agent.py, built here, offline), sampled at
temperature 1.0 against the scripted user on retail's training tasks, as the agent chain's sampled evaluation
runs it. "generation" is the time inside the model's generate calls; the loop's share is the rest of the wall time
(the simulator, the tools, the database copies, the scoring).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _timing import quick_flag

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from rewardkit.loop.drive import run_episodes
from rewardkit.loop.lockstep import episode_seed, run_lockstep
from rewardkit.runs.episodes.spec import RunSpec, build_plan


def timed(fn: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    return call


def main() -> None:
    from _tiny_agent import TASK, tiny_agent

    quick = quick_flag(__doc__)
    n_tasks, trials, batch = (2, 2, 4) if quick else (8, 8, 32)
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_agent(Path(tmp) / "agent")
        spec = RunSpec(
            domain="retail",
            agent=str(model),
            user="scripted",
            split="train",
            limit=n_tasks,
            trials=trials,
            temperature=1.0,
            max_tokens=64,
            max_turns=4,
            tools=False,
            workers=batch,
        )
        plan, _ = build_plan(spec)
        agent = plan.make_agent.batch
        tasks = [t for t in plan.tasks for _ in range(trials)]
        seeds = [episode_seed(str(t["id"]), k % trials) for k, t in enumerate(tasks)]
        agent.replies([[{"role": "user", "content": TASK}]], [0])  # warm-up: the engine's first call
        rows = []
        for name, run in (
            (
                "one conversation per generation (8 episodes in threads)",
                lambda: run_episodes(
                    plan.domain, tasks, lambda task: agent, plan.simulator, plan.limits, 8, plan.system
                ),
            ),
            (
                f"lockstep cohorts of {batch}, one generation per round",
                lambda: run_lockstep(plan.domain, tasks, agent, plan.simulator, plan.limits, seeds, batch, plan.system),
            ),
        ):
            spent: list[float] = []
            engine = agent.engine  # instrumented: the time inside generation (under the agent's lock: no overlap)
            engine._infer = timed(type(engine)._infer.__get__(engine), spent)
            start = time.perf_counter()
            results = run()
            wall = time.perf_counter() - start
            turns = sum(r.infos.turns for r in results)
            rows.append((name, wall, sum(spent), len(spent), turns))
    print(f"$ python benchmarks/bench_eval.py{' --quick' if quick else ''}")
    print(f"{len(tasks)} episodes ({n_tasks} tasks x {trials} trials), sampled at temperature 1.0, scripted user\n")
    print("| evaluation | wall s | generation s | generate calls | agent turns | the loop's share |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, wall, gen, calls, turns in rows:
        print(f"| {name} | {wall:.2f} | {gen:.2f} | {calls} | {turns} | {1 - gen / wall:.0%} |")
    print(f"| speed-up of the whole evaluation | {rows[0][1] / rows[1][1]:.1f}x | | | | |")


if __name__ == "__main__":
    main()
