"""A real model as the customer: play episodes, keep them as data, and score the user review on their labels.

    rewardkit real-model                                   # once: the model folder, and how to serve it
    swift deploy --model ~/.cache/rewardkit/smollm2-135m-instruct --model_type llama --template chatml \\
        --infer_backend transformers --served_model_name smollm2 --port 8011 --max_batch_size 16
    python experiments/real_customer.py play --url http://127.0.0.1:8011/v1 --prompt transcript --tasks 40
    python experiments/real_customer.py play --url http://127.0.0.1:8011/v1 --prompt chat --tasks 16
    python experiments/real_customer.py score                # the review against the labels, per kind

``play`` runs the gold agent (it knows every action, so the database reaches the goal whatever the customer says)
against the customer the model plays, on the first ``--tasks`` playable tasks of each domain, and writes each
episode as the customer lived it to ``experiments/data/real_customer/<domain>.<prompt>.jsonl``: the user's messages
with ``cut`` (stopped at the token cap after its retry) and ``waiting`` (approval requests waited), the agent's
messages, the tools' texts, how it ended, whether the goal was reached and the reward. The review's flags are not
written there: the labels (``labels.jsonl`` beside them, one row per episode: the user faults read in it, by kind,
and the voice of each user message) are written by reading the episodes alone. ``score`` then runs the review on the
stored episodes and prints its precision and recall per kind against the labels, the share of replies in the
customer's voice per format, and the reward inside the advantages under ``exclude``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardkit.envs import get_domain
from rewardkit.envs.tasks import TaskError
from rewardkit.envs.termination import Termination
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episodes
from rewardkit.loop.endpoint import EndpointSettings
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_review import KINDS, review
from rewardkit.loop.user_sim.base import GREETINGS, Progress, Turn
from rewardkit.loop.user_sim.openai_sim import OpenAISimulator
from rewardkit.rewards import TaskCompletion

DATA = Path(__file__).parent / "data" / "real_customer"
LABELS = DATA / "labels.jsonl"


class Recorder:
    """The simulator's replies as the episode saw them: text, cut, waiting; by task id (each task is played once)."""

    def __init__(self, inner: OpenAISimulator) -> None:
        self.inner, self.name = inner, inner.name
        self.replies: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._lock = threading.Lock()

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        text = self.inner.reply(task, dialogue, progress)
        with self._lock:
            self.replies[str(task["id"])].append(
                {"text": text, "cut": progress.cut, "waiting": bool(progress.requests)}
            )
        return text


def playable(domain_name: str, n: int) -> list[Mapping[str, Any]]:
    """The first ``n`` tasks of the domain that the reward can score (sorted by id, as the domain lists them)."""
    reward, out = TaskCompletion(), []
    for task in get_domain(domain_name).tasks().values():
        try:
            reward([""], messages=[[]], task=[task], domain=[domain_name])
        except TaskError:
            continue
        out.append(task)
        if len(out) == n:
            break
    return out


def play(args: argparse.Namespace) -> None:
    reward = TaskCompletion()
    for name in args.domains:
        domain = get_domain(name)
        assert domain.guidelines is not None
        settings = EndpointSettings(timeout_s=args.timeout_s, retries=1, concurrency=args.workers)
        sim = Recorder(
            OpenAISimulator(
                args.url,
                args.model,
                guidelines=domain.guidelines(),
                settings=settings,
                max_tokens=args.max_tokens,
                prompt=args.prompt,
            )
        )
        tasks = playable(name, args.tasks)
        limits = RolloutLimits(max_turns=args.max_turns, user_review="off")
        started = time.monotonic()
        results = run_episodes(domain, tasks, GoldAgent, sim, limits, workers=args.workers)
        rows = []
        for task, result in zip(tasks, results, strict=True):
            infos = result.infos
            score = reward([""], messages=[result.messages], task=[task], domain=[name], rollout_infos=[infos])[0]
            goal = reward([""], messages=[result.messages], task=[task], domain=[name])[0]  # the database alone
            replies = sim.replies[str(task["id"])]
            rows.append(
                {
                    "id": f"{name}.{args.prompt}.{task['id']}",
                    "domain": name,
                    "prompt": args.prompt,
                    "task": str(task["id"]),
                    "scenario": task.get("user_scenario"),
                    "dialogue": _dialogue(GREETINGS[domain.language], result.messages, replies, result.closing),
                    "tool_texts": [m["content"] for m in result.messages if m.get("role") == "tool"],
                    "termination": infos.termination,
                    "error": infos.error,
                    "goal_reached": goal == 1.0,
                    "reward": score,
                }
            )
        DATA.mkdir(parents=True, exist_ok=True)
        out = DATA / f"{name}.{args.prompt}.jsonl"
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        print(f"{out}: {len(rows)} episodes in {time.monotonic() - started:.0f} s")


def _dialogue(
    greeting: str, messages: Sequence[Mapping[str, Any]], replies: Sequence[Mapping[str, Any]], closing: str | None
):
    """The visible dialogue (greeting, the agent's texts to the user, the user's messages and closing line), each
    user message with its recorded ``cut`` and ``waiting``."""
    out: list[dict[str, Any]] = [{"role": "agent", "text": greeting}]
    users = iter(replies)
    for m in messages:
        if m.get("role") == "assistant" and "<tool_call>" not in (m.get("content") or ""):
            out.append({"role": "agent", "text": m.get("content") or ""})
        elif m.get("role") == "user":
            rec = next(users, {"cut": False, "waiting": False})
            out.append({"role": "user", "text": m["content"], "cut": rec["cut"], "waiting": rec["waiting"]})
    if closing is not None:
        rec = next(users, {"cut": False, "waiting": False})
        out.append({"role": "user", "text": closing, "cut": rec["cut"], "waiting": rec["waiting"]})
    return out


def stored(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def flags_of(row: Mapping[str, Any]) -> set[str]:
    """The review's kinds on a stored episode, as the episode ran it (its termination, its goal)."""
    task = {"id": row["task"], "user_scenario": row["scenario"]}
    dialogue = [Turn(d["role"], d["text"], d.get("cut", False), d.get("waiting", False)) for d in row["dialogue"]]
    language = get_domain(row["domain"]).language
    found = review(
        task,
        dialogue,
        language=language,
        tool_texts=row["tool_texts"],
        reached=lambda: row["goal_reached"],
        termination=Termination(row["termination"]),
    )
    return {f.kind for f in found}


def score(args: argparse.Namespace) -> None:
    labels = {r["id"]: r for r in stored(LABELS)}
    rows = [r for path in sorted(DATA.glob("*.*.jsonl")) for r in stored(path) if r["id"] in labels]
    by_domain: dict[str, list[tuple[set[str], set[str]]]] = defaultdict(list)
    voices: dict[str, Counter[str]] = defaultdict(Counter)
    advantages: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        label = labels[row["id"]]
        voices[row["prompt"]].update(label["voices"])
        if row["prompt"] != args.prompt:
            continue
        flagged = flags_of(row)
        by_domain[row["domain"]].append((set(label["faults"]), flagged))
        kept = not flagged
        key = "kept" if kept else "excluded"
        advantages[row["domain"]][
            f"{key}, goal {'reached' if row['goal_reached'] else 'missed'}, reward {row['reward']:g}"
        ] += 1
    for domain, pairs in by_domain.items():
        print(f"\n{domain} ({args.prompt}): {len(pairs)} episodes, {sum(bool(t) for t, _ in pairs)} with a user fault")
        print("| kind | labelled | flagged | both | precision | recall |\n|---|---:|---:|---:|---:|---:|")
        for kind in KINDS:
            tp = sum(kind in t and kind in f for t, f in pairs)
            lab, fl = sum(kind in t for t, _ in pairs), sum(kind in f for _, f in pairs)
            if lab or fl:
                p = f"{tp / fl:.3f}" if fl else "-"
                r = f"{tp / lab:.3f}" if lab else "-"
                print(f"| {kind} | {lab} | {fl} | {tp} | {p} | {r} |")
        print("under exclude:", dict(advantages[domain]))
    for prompt, counter in voices.items():
        total = sum(counter.values())
        share = counter["customer"] / total
        print(f"voice, {prompt}: {counter['customer']} of {total} replies the customer's ({share:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(required=True)
    p = sub.add_parser("play")
    p.add_argument("--url", required=True)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--prompt", choices=("transcript", "chat"), default="transcript")
    p.add_argument("--domains", nargs="+", default=["retail", "livestream"])
    p.add_argument("--tasks", type=int, default=40)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--max-turns", type=int, default=14)
    p.add_argument("--timeout-s", type=float, default=600)
    p.add_argument("--workers", type=int, default=16)
    p.set_defaults(func=play)
    s = sub.add_parser("score")
    s.add_argument("--prompt", choices=("transcript", "chat"), default="transcript")
    s.set_defaults(func=score)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
