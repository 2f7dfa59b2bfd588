"""A tiny Qwen3 whose turns end by themselves, for multi-turn tests (built once per session, offline)."""

from __future__ import annotations

import json
from pathlib import Path

from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
from rewardkit.envs import get_domain
from rewardkit.loop.gold import hermes_call
from rewardkit.loop.user_sim.base import GREETING, Progress, Turn
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.pipelines.tiny_model import build_tiny_model, teach

SYSTEM = "You are a retail customer service agent. Use the tools."
TASK = "10"  # a transfer: the gold hands the user over to a human and says nothing
# A task a random policy never completes, so the scripted user keeps the conversation going.
OPEN_TASK = "0"


def short_rows(task_ids: list[str]) -> list[dict]:
    """--multi-turn rows for ``task_ids`` with a one-line system prompt and no tools column (short prompts)."""
    rows, _ = build_tau2_grpo(Tau2Options(domain="retail", split="train", multi_turn=True))
    rows += build_tau2_grpo(Tau2Options(domain="retail", split="test", multi_turn=True))[0]
    by_id = {json.loads(r["task"])["id"]: r for r in rows}
    out = []
    for task_id in task_ids:
        row = by_id[task_id]
        out.append({**row, "messages": [{"role": "system", "content": SYSTEM}, row["messages"][1]]})
        out[-1].pop("tools")
    return out


def tiny_agent(out: Path) -> Path:
    """Random tiny Qwen3, then a few hundred steps on one exchange of OPEN_TASK encoded by ms-swift's own template:
    after the scripted user's opening, the task's first gold call (its result comes from the database). The model
    then calls that tool in many rollouts and ends its turns by itself."""
    from swift.model import get_processor
    from swift.template import TemplateInputs, get_template

    rows, _ = build_tau2_grpo(Tau2Options(domain="retail", split="train", multi_turn=True))
    corpus = [r["messages"][0]["content"] + r["tools"] for r in rows[:5]]
    build_tiny_model(out, corpus, max_positions=8192)
    task = get_domain("retail").tasks()[OPEN_TASK]
    opening = ScriptedSimulator().reply(task, [Turn("agent", GREETING)], Progress())
    first = task["evaluation_criteria"]["actions"][0]
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": opening},
        {"role": "assistant", "content": hermes_call(first["name"], first["arguments"])},
    ]
    template = get_template(get_processor(str(out)))
    template.set_mode("train")
    encoded = template.encode(TemplateInputs.from_dict({"messages": messages}))
    prefix = template.tokenizer.encode("<think>\n\n</think>\n\n", add_special_tokens=False)
    return teach(out, [(encoded["input_ids"], _masked(encoded["labels"], prefix))], steps=600, lr=2e-3)


def _masked(labels: list[int], prefix: list[int]) -> list[int]:
    """No loss on the empty think block: at rollout time it is part of the prompt, never sampled."""
    out = list(labels)
    for i in range(len(out) - len(prefix) + 1):
        if out[i : i + len(prefix)] == prefix:
            out[i : i + len(prefix)] = [-100] * len(prefix)
    return out
