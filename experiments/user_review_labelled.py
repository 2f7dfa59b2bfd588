"""The user review on labelled episodes: each rule's precision and recall, and what the review does to the reward.

    python experiments/user_review_labelled.py                 # retail and the live-stream console, rates 0 and 0.2
    python experiments/user_review_labelled.py --seeds 10 --json runs/user-review.json

The episodes: every task of each domain played by an agent that knows the answer and asks the user to confirm each
write first (the gold agent, plus the confirmation a retail policy asks for), against the scripted user wrapped in
a simulator that makes known mistakes (``FaultySimulator``): a share ``rate`` of the episodes is given one mistake,
of a kind drawn at random, made where that kind can be made, in the domain's language (English on retail, Chinese
on the console). The labels are the
mistakes it made; the flags are the review's (``rollout.user_review: count``, so every episode is scored as well).

Per kind: precision (flagged episodes that carry that mistake) and recall (episodes with that mistake that are
flagged). Then the effect on the reward: the agent knows the answer, so each episode it does not complete is the
user's doing. The share of episodes scored 0 among those that train: all of them without the review, those the review
leaves in with it.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardkit.envs import get_domain
from rewardkit.envs.tasks import TaskError
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episodes
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_review import KINDS
from rewardkit.loop.user_sim.faulty import FaultySimulator
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards import TaskCompletion

ASK = {"en": "Before I run {name}, please confirm: shall I proceed?", "zh": "执行 {name} 之前请确认：可以吗？"}


class ConfirmingAgent:
    """The gold agent, asking the user to confirm each write before it sends it (as a retail policy requires)."""

    def __init__(self, task: Mapping[str, Any], writes: frozenset[str], language: str) -> None:
        self.gold, self.writes, self.language = GoldAgent(task), writes, language
        self.asked: set[int] = set()

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> str:
        if messages and messages[-1].get("role") == "tool" and "APPROVAL_REQUIRED" in str(messages[-1]["content"]):
            return self.gold(messages)  # a write held for the user's approval: the gold agent puts it to the user
        step = self.gold.step
        action = self.gold.actions[step] if self.gold.held is None and step < len(self.gold.actions) else None
        if action is not None and action["name"] in self.writes and step not in self.asked:
            self.asked.add(step)
            return ASK[self.language].format(name=action["name"])
        return self.gold(messages)


def episodes(domain_name: str, rate: float, seed: int) -> list[dict[str, Any]]:
    """Every scorable task of the domain once, through the faulty simulator at ``rate``."""
    domain = get_domain(domain_name)
    reward = TaskCompletion()
    tasks = []
    for task in domain.tasks().values():
        try:
            reward([""], messages=[[]], task=[task], domain=[domain_name])
        except TaskError:  # a task the reward refuses (a gold that fails, or that shows nothing): not playable
            continue
        tasks.append(task)
    simulator = FaultySimulator(ScriptedSimulator(), rate=rate, seed=seed)
    limits = RolloutLimits(user_review="count")
    results = run_episodes(
        domain, tasks, lambda t: ConfirmingAgent(t, domain.write_tools, domain.language), simulator, limits, workers=4
    )
    out = []
    for task, result in zip(tasks, results, strict=True):
        score = reward(
            [""], messages=[result.messages], task=[task], domain=[domain_name], rollout_infos=[result.infos]
        )
        flags = sorted({flag["kind"] for flag in result.infos.user_flags})
        out.append(
            {
                "task": str(task["id"]),
                "injected": result.infos.user_sim_fault,
                "flags": flags,
                "termination": result.infos.termination,
                "reward": score[0],
            }
        )
    return out


def scores(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kind: true and false positives, false negatives, precision and recall (None where undefined)."""
    out = {}
    for kind in KINDS:
        tp = sum(r["injected"] == kind and kind in r["flags"] for r in rows)
        fp = sum(r["injected"] != kind and kind in r["flags"] for r in rows)
        fn = sum(r["injected"] == kind and kind not in r["flags"] for r in rows)
        out[kind] = {
            "injected": tp + fn,
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
        }
    return out


def zero_share(rows: Sequence[Mapping[str, Any]], review: bool) -> tuple[float, int]:
    """The share of training episodes scored 0: every episode, or (``review``) those with no flag."""
    kept = [r for r in rows if not (review and r["flags"])]
    return (sum(r["reward"] == 0.0 for r in kept) / len(kept) if kept else 0.0), len(kept)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def show(name: str, result: Mapping[str, Any]) -> None:
    """One domain at one rate, as a markdown table and a line on the reward."""
    counts = f"{result['episodes']} episodes, {result['with_a_mistake']} with a mistake, {result['flagged']} flagged"
    print(f"\n{name}: {counts}")
    print("| kind | injected | found | false flags | precision | recall |\n|---|---:|---:|---:|---:|---:|")
    for kind, s in result["kinds"].items():
        figures = f"{_figure(s['precision'])} | {_figure(s['recall'])}"
        print(f"| {kind} | {s['injected']} | {s['tp']} | {s['fp']} | {figures} |")
    print(
        f"scored 0 among training episodes: {result['zero_without_review']:.3f} without the review, "
        f"{result['zero_with_review']:.3f} with it ({result['kept_with_review']} of {result['episodes']} kept)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="+", default=["retail", "livestream"])
    parser.add_argument("--rates", nargs="+", type=float, default=[0.0, 0.2])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report: dict[str, Any] = {}
    for domain in args.domains:
        for rate in args.rates:
            rows = [row for seed in range(args.seeds) for row in episodes(domain, rate, seed)]
            off, on = zero_share(rows, review=False), zero_share(rows, review=True)
            report[f"{domain}@{rate}"] = {
                "episodes": len(rows),
                "with_a_mistake": sum(r["injected"] is not None for r in rows),
                "injected": dict(Counter(r["injected"] for r in rows if r["injected"])),
                "flagged": sum(bool(r["flags"]) for r in rows),
                "kinds": scores(rows),
                "zero_without_review": off[0],
                "zero_with_review": on[0],
                "kept_with_review": on[1],
            }
            show(f"{domain}, fault rate {rate}", report[f"{domain}@{rate}"])
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
