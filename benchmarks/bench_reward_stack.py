"""The planner's seven rewards as ms-swift calls them, against the floor of any answer check, as a ratio in one run.

    python benchmarks/bench_reward_stack.py            # 1,024 unique completions: 128 prompts x 8 rollouts
    python benchmarks/bench_reward_stack.py --quick    # 64, for CI: runs every path, asserts no figure

ms-swift's GRPO trainer builds each reward once and calls it on the whole batch with every dataset column as a
keyword, one reward after the other. Here: the ``planner`` set's seven rewards, built once, called in the set's
order on one batch shaped like a GRPO step, the parse cache cleared before each timed batch, so every batch pays
its own parses. The batch: 128 prompts (the bundled teacher outputs, defective ones included) x 8 rollouts. Every
rollout's think is its own, so all 1,024 completions differ. Answers: in the first case each is written by two of
its group's eight rollouts (4 distinct answers a prompt, variants of the teacher's rewrite); in the second every
answer differs in its rewrite; in the third, the worst case, every answer's sub-questions differ too, so no two
rollouts plan alike.

The floor is what any reward of a JSON answer must do once per completion: one ``json.loads`` of the answer and
one JSON Schema validation (the same compiled validator). Both are timed best of ``--repeat`` in the same run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rewardkit.rewards import SETS, reward_class
from rewardkit.rewards._parsing import COMPLETIONS
from rewardkit.rewards._schema import load_schema

GROUP = 8  # rollouts per prompt
REWRITE, TASKS = "补全后的问题", "处理问题"
TEACHER = Path(__file__).resolve().parent.parent / "examples" / "planning" / "teacher_p1.jsonl"


def batch(n: int, per_answer: int, steps: bool = False) -> tuple[list[str], dict[str, list[Any]]]:
    """``n`` unique completions (groups of 8 rollouts of one prompt) with their ``solution`` and ``experts``
    columns; each answer is written by ``per_answer`` rollouts of its group (with ``steps``, each plans its own)."""
    lines = TEACHER.read_text(encoding="utf-8").splitlines()
    rows = [row for row in map(json.loads, filter(None, lines)) if "gold" in row]  # defective outputs included
    completions, solutions, experts = [], [], []
    for i in range(n):
        row = rows[(i // GROUP) % len(rows)]
        think = f"<think>\n第{i}次规划。"
        completions.append(_variant(row["output"], (i % GROUP) // per_answer, steps).replace("<think>\n", think, 1))
        solutions.append(json.dumps(row["gold"], ensure_ascii=False))
        experts.append(row["experts"])
    assert len(set(completions)) == n
    return completions, {"solution": solutions, "experts": experts}


def _variant(output: str, k: int, steps: bool = False) -> str:
    """The teacher's output with its rewrite numbered ``k`` (k = 0: as written; a broken answer stays broken), and
    with ``steps`` each sub-question too."""
    start, end = output.find("<answer>"), output.rfind("</answer>")
    try:
        answer = json.loads(output[start + len("<answer>") : end])
        answer[REWRITE] = f"{answer[REWRITE]}（{k}）" if k else answer[REWRITE]
        for step in answer["plan"] if steps and k else ():
            step[TASKS] = [f"{task}（{k}）" for task in step[TASKS]]
    except (ValueError, KeyError, TypeError):
        return output
    return f"{output[:start]}<answer>\n{json.dumps(answer, ensure_ascii=False)}\n{output[end:]}"


def best(fn: Callable[[], object], repeat: int) -> float:
    """Seconds of the least disturbed of ``repeat`` calls, each on a cold parse cache."""
    times = []
    for _ in range(repeat):
        COMPLETIONS.clear()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024, help="unique completions in the batch (default 1,024)")
    parser.add_argument("--repeat", type=int, default=5, help="timed batches per side; the best counts (default 5)")
    parser.add_argument("--quick", action="store_true", help="64 completions, 2 repeats: a smoke run for CI")
    args = parser.parse_args()
    n, repeat = (64, 2) if args.quick else (args.n, args.repeat)
    rewards = [reward_class(key)() for key in SETS["planner"].keys]
    validator = load_schema("zh").validator
    print(f"$ python benchmarks/bench_reward_stack.py{' --quick' if args.quick else ''}")
    print(f"{n:,} unique completions ({n // GROUP} prompts x {GROUP} rollouts), one batch; best of {repeat}\n")
    print("| answers | distinct | seven rewards µs | floor µs | ratio |\n|---|---:|---:|---:|---:|")
    cases = (
        ("two rollouts to an answer", 2, False),
        ("every rewrite its own", 1, False),
        ("every plan its own", 1, True),
    )
    for label, per_answer, steps in cases:
        completions, columns = batch(n, per_answer, steps)

        def stack(completions: list[str] = completions, columns: dict[str, list[Any]] = columns) -> list[Any]:
            return [reward(completions, **columns) for reward in rewards]

        def floor(completions: list[str] = completions) -> int:
            valid = 0
            for text in completions:
                start, end = text.find("<answer>"), text.rfind("</answer>")
                try:
                    valid += validator.is_valid(json.loads(text[start + len("<answer>") : end]))
                except ValueError:
                    continue
            return valid

        scores = stack()  # warm-up: tokenizer, similarity and config set-up happen once per process, as in training
        assert all(len(s) == n for s in scores) and floor() > n // 2
        t_stack, t_floor = best(stack, repeat), best(floor, repeat)
        distinct = len({c[c.find("<answer>") :] for c in completions})
        print(
            f"| {label} | {distinct:,} | {t_stack / n * 1e6:.1f} | {t_floor / n * 1e6:.1f} | {t_stack / t_floor:.2f}x |"
        )


if __name__ == "__main__":
    main()
