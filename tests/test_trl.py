"""rewardkit's rewards under TRL's GRPOTrainer: conversational completions, ``__name__``, constructor keywords.

TRL (unlike ms-swift) takes reward instances, names them by ``reward_func.__name__`` and, on a
conversational dataset, passes each completion as a list of messages.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import E5, GOLD, GOOD, THINK, answer, completion, step

from rewardkit.rewards import (
    PLANNER_WEIGHTS,
    PLANNING_REWARDS,
    TaskCompletion,
    TaskCompletionRate,
    UserSimFailure,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "planning"
WEIGHTS = PLANNER_WEIGHTS  # the planner's seven rewards (strict_format .. plan_coverage), declared in rewards/sets.py
SEVEN = list(WEIGHTS)

BATCH = [
    GOOD,
    completion(THINK, answer("查看周报", step("策略推荐专家", "推荐策略"))),
    completion("短", answer("查看经营周报", step("数据分析专家", "查看经营周报"))),
    "garbage <think> no close",
    "",
]
COLUMNS: dict[str, Any] = {"solution": [GOLD] * len(BATCH), "experts": [E5] * len(BATCH)}


def assistant(content: Any) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": content}]


@pytest.mark.parametrize("key", SEVEN)
class TestConversationalCompletions:
    def test_same_score_as_the_string(self, key: str) -> None:
        reward = PLANNING_REWARDS[key]()
        expected = reward(BATCH, **COLUMNS)
        assert reward([assistant(c) for c in BATCH], **COLUMNS) == expected
        # TRL's keyword call, with the prompts and ids it passes too.
        got = reward(prompts=[[]] * len(BATCH), completions=[assistant(c) for c in BATCH], completion_ids=[], **COLUMNS)
        assert got == expected

    def test_text_parts_are_joined(self, key: str) -> None:
        reward = PLANNING_REWARDS[key]()
        parts = [assistant([{"type": "text", "text": c[:7]}, {"type": "text", "text": c[7:]}]) for c in BATCH]
        assert reward(parts, **COLUMNS) == reward(BATCH, **COLUMNS)

    def test_last_assistant_message_is_scored(self, key: str) -> None:
        # After a tool call TRL's completion holds assistant, tool, assistant turns.
        turns = [
            [
                {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
                {"role": "tool", "content": "result"},
                {"role": "assistant", "content": c},
            ]
            for c in BATCH
        ]
        reward = PLANNING_REWARDS[key]()
        assert reward(turns, **COLUMNS) == reward(BATCH, **COLUMNS)

    @pytest.mark.parametrize(
        ("bad", "shape"),
        [({"role": "assistant", "content": GOOD}, "a dict"), (7, "an int"), (None, "None"), ([1, 2], "a list of int")],
    )
    def test_other_shapes_raise_naming_shape_and_index(self, key: str, bad: Any, shape: str) -> None:
        batch = [GOOD, GOOD, GOOD, bad]
        columns = {"solution": [GOLD] * 4, "experts": [E5] * 4}
        with pytest.raises(TypeError, match=rf"completion 3 is {shape}; pass a string or TRL's conversational"):
            PLANNING_REWARDS[key]()(batch, **columns)

    def test_name_is_the_class_name_after_pickling(self, key: str) -> None:
        reward = PLANNING_REWARDS[key]()
        assert reward.__name__ == type(reward).__name__ == PLANNING_REWARDS[key].__name__
        assert pickle.loads(pickle.dumps(reward)).__name__ == type(reward).__name__

    def test_typo_keyword_raises_naming_it(self, key: str) -> None:
        with pytest.raises(TypeError, match=r"'confg'.*accepts: args, config"):
            PLANNING_REWARDS[key](confg={"schema": "en"})
        PLANNING_REWARDS[key](args=None, config=None)  # what ms-swift and the docs pass


def test_unreadable_content_raises() -> None:
    with pytest.raises(TypeError, match=r"completion 0: the last assistant message's content is a dict"):
        PLANNING_REWARDS["strict_format"]()([assistant({"token_ids": [1]})])
    with pytest.raises(TypeError, match=r"completion 0 is a list of messages without an assistant message"):
        PLANNING_REWARDS["strict_format"]()([[{"role": "user", "content": GOOD}]])


def test_think_length_also_takes_a_tokenizer_and_task_completion_only_its_own() -> None:
    PLANNING_REWARDS["think_length"](tokenizer=None)
    with pytest.raises(TypeError, match=r"'tokenizer'.*accepts: args, config$"):
        TaskCompletion(tokenizer=None)  # its __init__ swallows **_: the check is the base's


def test_episode_rewards_read_messages_whatever_the_completions() -> None:
    # They judge the 'messages' column; a completion is only counted, so ms-swift >= 4.6's
    # token-id turns and TRL's message lists both keep working.
    from rewardkit.envs.retail.domain import tasks

    task = tasks()["0"]
    columns = {"messages": [[{"role": "assistant", "content": "hi"}]] * 3, "task": [task] * 3, "domain": ["retail"] * 3}
    shapes = [["x"] * 3, [assistant("x")] * 3, [[1, 2, 3], None, {"token_ids": [1]}]]
    for reward in (TaskCompletion(), TaskCompletionRate()):
        assert reward(shapes[1], **columns) == reward(shapes[2], **columns) == reward(shapes[0], **columns)
    infos = [{"termination": "user_sim_error"}] * 3
    assert all(UserSimFailure()(s, rollout_infos=infos) == [1.0] * 3 for s in shapes)


def prompt_rows() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (EXAMPLES / "grpo_tiny.jsonl").read_text(encoding="utf-8").splitlines()]
    return [{"prompt": r["messages"], "solution": r["solution"], "experts": r["experts"]} for r in rows]


# Runs in a fresh interpreter: a TRL user's process. In the test process, earlier tests may have imported ms-swift's
# GRPO trainer, which patches TRL's GRPOTrainer for its own use.
TRL_RUN = """
import json, sys
sys.path.insert(0, sys.argv[3])
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer
from test_trl import SEVEN, WEIGHTS, prompt_rows
from rewardkit.rewards import PLANNING_REWARDS, _base
from rewardkit.rewards._base import is_conversational

seen = []
texts = _base.completion_texts
def recording(completions, strict=True):  # the probe: what each reward call got, before it is read
    seen.extend(completions)
    return texts(completions, strict)
_base.completion_texts = recording

# The lines of docs/rewards.md#with-trl.
rewards = [PLANNING_REWARDS[key]() for key in SEVEN]
config = GRPOConfig(
    output_dir=sys.argv[2], reward_weights=[WEIGHTS[key] for key in SEVEN], max_steps=2,
    num_generations=2,  # generation_batch_size (2 x 1 step) must be a multiple of it
    per_device_train_batch_size=2, max_completion_length=32, logging_steps=1, use_vllm=False, use_cpu=True,
    bf16=False, report_to=[], save_strategy="no", seed=42,
)
dataset = Dataset.from_list(prompt_rows())
trainer = GRPOTrainer(model=sys.argv[1], reward_funcs=rewards, args=config, train_dataset=dataset)
trainer.train()
conversational = [is_conversational(c) and c[-1]["role"] == "assistant" for c in seen]
print(json.dumps({"step": trainer.state.global_step, "log": trainer.state.log_history,
                  "seen": len(seen), "conversational": all(conversational)}))
"""


@pytest.mark.e2e
def test_trl_grpo_two_steps_with_the_seven_rewards(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("trl")
    from rewardkit.pipelines.planning import planning_corpus
    from rewardkit.pipelines.tiny_model import build_tiny_model, offline_env

    model = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", planning_corpus(EXAMPLES))
    script = tmp_path / "trl_run.py"
    script.write_text(TRL_RUN, encoding="utf-8")
    cmd = [sys.executable, str(script), str(model), str(tmp_path / "grpo"), str(Path(__file__).parent)]
    env = {**os.environ, **offline_env()}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])

    assert result["step"] == 2
    steps = [row for row in result["log"] if "reward" in row]
    assert len(steps) == 2
    for row in steps:
        means = {key: row.get(f"rewards/{PLANNING_REWARDS[key].__name__}/mean") for key in SEVEN}
        assert not [k for k, v in means.items() if v is None], row
        assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in means.values()), means
        # TRL's total is the weighted sum of the per-reward means: the weights arrived in order.
        assert row["reward"] == pytest.approx(sum(WEIGHTS[k] * v for k, v in means.items()), abs=1e-4)
    # 2 steps x 2 completions x 7 rewards, each a conversational list of messages.
    assert result["seen"] == 2 * 2 * 7 and result["conversational"]
