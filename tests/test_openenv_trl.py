"""TRL's GRPOTrainer on a served domain through ``environment_factory`` (``rewardkit.serve.trl_env``): the tiny Qwen3
trains two steps against `rewardkit env serve --openenv`, the loss on the policy's tokens only. Runs in the OpenEnv
job (`make test-openenv`)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv")  # the optional extra: rewardkit[openenv], in its own stack (constraints/openenv.txt)

from openenv_servers import served

from rewardkit.envs import get_domain

pytestmark = pytest.mark.openenv


@pytest.fixture(scope="module")
def retail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("openenv")) as (url, _):
        yield url


ASK = {"name": "send_message", "arguments": {"message": "Could you give me your e-mail address?"}}
CALL = f"<tool_call>\n{json.dumps(ASK)}\n</tool_call>"


def taught_model(out: Path, tools: list[dict[str, Any]]) -> Path:
    """The tiny Qwen3 under TRL's Qwen3 chat template (TRL parses tool calls with it), taught in seconds to ask the
    customer through ``send_message`` with ``tools`` in its prompt, as TRL renders them: a random model would never
    call a tool."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template

    from rewardkit.pipelines.tiny_model import build_tiny_model, teach

    tasks = list(get_domain("retail").tasks().values())
    corpus = [CALL, json.dumps(tools), *(json.dumps(t) for t in tasks[:30])]
    model = build_tiny_model(out, corpus, max_positions=8192)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = qwen3_chat_template
    tokenizer.save_pretrained(model)
    examples = []
    for task in tasks[:2]:  # the openings of the two tasks trained on
        prompt = [{"role": "user", "content": task["user_scenario"]["instructions"]["reason_for_call"]}]
        head = tokenizer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=True)
        whole = tokenizer.apply_chat_template([*prompt, {"role": "assistant", "content": CALL}], tools=tools)
        ids = [int(t) for t in whole["input_ids"]]
        examples.append((ids, [-100] * len(head["input_ids"]) + ids[len(head["input_ids"]) :]))
    return teach(model, examples, steps=300)


def test_trl_grpo_trains_on_the_served_domain_with_the_loss_on_the_policys_tokens_only(
    retail: str, tmp_path: Path
) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from transformers.utils import get_json_schema
    from trl import GRPOConfig, GRPOTrainer

    from rewardkit.serve.trl_env import environment_factory, task_completion

    factory = environment_factory(retail, "retail")
    methods = inspect.getmembers(factory(), inspect.ismethod)
    tools = [get_json_schema(m) for name, m in methods if name != "reset" and not name.startswith("_")]
    model = taught_model(tmp_path / "model", tools)
    tokenizer = AutoTokenizer.from_pretrained(model)
    seen: list[list[tuple[int, bool]]] = []  # per completion: (token id, whether the loss reads it)

    class Recording(GRPOTrainer):
        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            ids, real, policy = inputs["completion_ids"], inputs["completion_mask"], inputs["tool_mask"]
            for row, pad, own in zip(ids.tolist(), real.tolist(), policy.tolist(), strict=True):
                seen.append([(t, bool(k)) for t, p, k in zip(row, pad, own, strict=True) if p])
            return super()._compute_loss(model, inputs)

    rows = [{"prompt": [{"role": "user", "content": ""}], "task_id": tid} for tid in ("0", "1")]
    config = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        max_steps=2,
        num_generations=2,
        per_device_train_batch_size=2,
        max_completion_length=160,
        max_tool_calling_iterations=2,
        logging_steps=1,
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        seed=42,
    )
    trainer = Recording(
        model=str(model),
        processing_class=tokenizer,
        reward_funcs=[task_completion],
        args=config,
        train_dataset=Dataset.from_list(rows),
        environment_factory=factory,
    )
    trainer.train()
    logged = [row for row in trainer.state.log_history if "reward" in row]
    assert trainer.state.global_step == 2 and len(logged) == 2
    assert all(row["tools/call_frequency"] > 0 for row in logged)  # the policy talked to the customer
    # The customer's replies came back as tool turns, and none of their tokens is trained on: each completion's
    # masked-out span is exactly what the served user said, and the policy's tokens hold its own call.
    masked = [tokenizer.decode([t for t, k in tokens if not k]) for tokens in seen]
    trained = [tokenizer.decode([t for t, k in tokens if k]) for tokens in seen]
    assert any("e-mail" in text or "email" in text or "zip" in text for text in masked), masked
    assert all("send_message" in text for text in trained) and not any("<tool_response>" in t for t in trained)


def test_a_row_whose_task_is_not_the_servers_fails_at_reset(retail: str) -> None:
    # A dataset built from another version of the domain's tasks: TRL's reset fails at once, naming the mismatch,
    # rather than training on episodes the server scores against its own task.
    from rewardkit.serve.trl_env import environment_factory

    task = get_domain("retail").tasks()["0"]
    edited = {**task, "evaluation_criteria": {**task["evaluation_criteria"], "communicate_info": ["a refund"]}}
    factory = environment_factory(retail, "retail")
    with pytest.raises(Exception, match="reset: task '0' is not the caller's"):
        factory().reset(task_id="0", task=json.dumps(edited))
    assert factory().reset(task_id="0", task=json.dumps(task))  # the server's own task opens, the user speaking first
