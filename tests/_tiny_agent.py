"""A tiny Qwen3 whose turns end by themselves, for multi-turn tests (built once per session, offline)."""

from __future__ import annotations

import json
from pathlib import Path

from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
from rewardkit.plugins.envs import get_domain
from rewardkit.plugins.rollout.gold import GoldAgent
from rewardkit.tiny_model import build_tiny_model, teach

SYSTEM = "You are a retail customer service agent. Use the tools."
TASK = "10"  # the replies it is taught: find the user, look up an order, transfer
# A task a random policy never completes, so the scripted user keeps the conversation going.
OPEN_TASK = "0"


def short_rows(task_ids: list[str]) -> list[dict]:
    """--multi-turn rows for ``task_ids`` with a one-line system prompt and no tools column (short prompts)."""
    rows, _ = build_tau2_grpo(Tau2Options(split="train", multi_turn=True))
    rows += build_tau2_grpo(Tau2Options(split="test", multi_turn=True))[0]
    by_id = {json.loads(r["task"])["id"]: r for r in rows}
    out = []
    for task_id in task_ids:
        row = by_id[task_id]
        out.append({**row, "messages": [{"role": "system", "content": SYSTEM}, row["messages"][1]]})
        out[-1].pop("tools")
    return out


def tiny_agent(out: Path) -> Path:
    """Random tiny Qwen3, then a few dozen steps on the gold agent's replies: it learns to end its turns."""
    rows, _ = build_tau2_grpo(Tau2Options(split="train", multi_turn=True))
    corpus = [r["messages"][0]["content"] + r["tools"] for r in rows[:5]]
    build_tiny_model(out, corpus, max_positions=8192)
    agent = GoldAgent(get_domain("retail").tasks()[TASK])
    replies = [agent([]) for _ in range(len(agent.actions) + 2)]
    context = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
    return teach(out, [(context, r) for r in replies], steps=80, lr=3e-3)
