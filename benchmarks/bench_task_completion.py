"""Cost of judging a tau2 retail rollout: canonical state hash (full vs incremental) and TaskCompletion.

python benchmarks/bench_task_completion.py            # --quick: small sizes, for CI
"""

from __future__ import annotations

import json

from _timing import per_call, quick_flag

from rewardkit.envs import make_env
from rewardkit.envs.retail.db import TABLES
from rewardkit.envs.retail.domain import tasks
from rewardkit.rewards import TaskCompletion


def trajectory(task: dict) -> list[dict]:
    turns = [
        {"role": "assistant", "content": "<tool_call>" + json.dumps(a) + "</tool_call>"}
        for a in task["evaluation_criteria"]["actions"]
    ]
    return [*turns, {"role": "assistant", "content": " ".join(task["evaluation_criteria"]["communicate_info"])}]


def main() -> None:
    quick = quick_flag(__doc__)
    all_tasks = list(tasks().values())
    env = make_env("retail")
    env.replay(all_tasks[0]["evaluation_criteria"]["actions"])  # an exchange: one order touched
    assert env.state_hash() == TABLES.full_hash(env.conn)
    full = per_call(lambda: TABLES.full_hash(env.conn), 2 if quick else 10)
    incremental = per_call(env.state_hash, 10 if quick else 100)

    size = 8 if quick else 64
    batch = [all_tasks[i % len(all_tasks)] for i in range(size)]
    columns = {"messages": [trajectory(t) for t in batch], "task": batch, "domain": ["retail"] * len(batch)}
    reward = TaskCompletion()
    assert reward(["x"] * len(batch), **columns) == [1.0] * len(batch)  # also warms the gold cache
    scoring = per_call(lambda: reward(["x"] * len(batch), **columns), 3) / len(batch)

    print("| step | ms |\n|---|---:|")
    print(f"| state hash, full export + serialise | {full * 1e3:.2f} |")
    print(f"| state hash, incremental (dirty entities only) | {incremental * 1e3:.2f} |")
    print(f"| speed-up of the hash | {full / incremental:.0f}x |")
    print(f"| TaskCompletion per rollout (copy + replay + hash), batch of {size} | {scoring * 1e3:.2f} |")


if __name__ == "__main__":
    main()
