"""Token and loss audit: a real multi-turn rollout through ms-swift's own loop, engine and encoder.

The simulated_user scheduler, the transformers engine sampling from a tiny Qwen3, ms-swift's
``run_multi_turn`` (the colocate driver) and ``encode_sample`` (what the GRPO trainer
trains on). Every assistant turn's sampled ids must appear verbatim among the loss
tokens, and nothing else may carry loss but the template's own separator after the end
token. Runs on both pinned ms-swift versions (4.4: ids frozen by the scheduler; 4.6:
kept natively).
"""

from __future__ import annotations

import copy

import pytest
from _tiny_agent import OPEN_TASK, short_rows

from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.user_sim.scripted import ScriptedSimulator

pytestmark = pytest.mark.compat


def loss_spans(input_ids: list[int], labels: list[int]) -> list[list[int]]:
    spans: list[list[int]] = []
    current: list[int] = []
    for token, label in zip(input_ids, labels, strict=True):
        if label != -100:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    return [*spans, current] if current else spans


@pytest.fixture(scope="module")
def rollouts(tiny_agent_model):
    from swift.infer_engine import TransformersEngine
    from swift.infer_engine.protocol import RequestConfig, RolloutInferRequest, RolloutOutput
    from swift.model import get_model_processor
    from swift.rollout.agent_loop import invoke_async_hook, run_multi_turn
    from swift.template import get_template

    from rewardkit.plugins.scheduler import SimulatedUserScheduler
    from rewardkit.plugins.tokens import NATIVE_TOKEN_IDS

    # Built as the GRPO trainer builds its rollout engine without vLLM: the trainer's template (train mode,
    # switched to generation by generate_context) copied into a TransformersEngine over the same model.
    model, processor = get_model_processor(str(tiny_agent_model))
    template = get_template(processor)
    template.set_mode("train")
    engine = TransformersEngine(model, template=copy.copy(template), max_batch_size=0)
    extra = {"template": template} if NATIVE_TOKEN_IDS else {}  # what each version's trainer passes
    scheduler = SimulatedUserScheduler(
        max_turns=3, tokenizer=engine.tokenizer, simulator=ScriptedSimulator(), limits=RolloutLimits(), **extra
    )
    row = short_rows([OPEN_TASK])[0]
    requests = [
        RolloutInferRequest(messages=copy.deepcopy(row["messages"]), data_dict=row, uuid=f"r{i}") for i in range(6)
    ]
    sampled: dict[str, list[list[int]]] = {r.uuid: [] for r in requests}
    config = RequestConfig(max_tokens=96, temperature=1.0, return_details=True)

    def rollout(batch, cfg):
        with template.generate_context():
            outs = engine.infer(batch, cfg, use_tqdm=False)
        for request, out in zip(batch, outs, strict=True):
            sampled[request.uuid].append(list(out.choices[0].token_ids))
        return [RolloutOutput(response=o) for o in outs]

    invoke_async_hook(scheduler.on_trajectory_start(requests))
    outputs = run_multi_turn(requests, rollout(requests, config), scheduler, rollout, config, max_turns=3)
    return row, requests, outputs, sampled, template


class TestTokenAudit:
    def test_training_ids_are_the_sampled_ids_in_every_turn(self, rollouts) -> None:
        from swift.rl_core.data import OnPolicySample
        from swift.rlhf_trainers.utils import encode_sample

        from rewardkit.plugins.tokens import NATIVE_TOKEN_IDS

        row, requests, outputs, sampled, template = rollouts
        separator = template.tokenizer.encode("\n", add_special_tokens=False)  # Qwen's chat_sep after <|im_end|>
        multi = 0
        for request, output in zip(requests, outputs, strict=True):
            sample = OnPolicySample(messages=copy.deepcopy(row["messages"]))
            sample.apply_rollout_output(rollout_output=output)
            encoded = encode_sample(sample, template)
            spans = loss_spans(encoded["input_ids"], encoded["labels"])
            turns = sampled[request.uuid]
            assert output.rollout_infos["num_turns"] == len(turns)
            # One loss span per assistant turn: system, user and tool tokens carry none.
            assert len(spans) == len(turns)
            for i, (span, ids) in enumerate(zip(spans, turns, strict=True)):
                assert span[: len(ids)] == ids, f"turn {i + 1}: trained ids differ from sampled ids"
                assert span[len(ids) :] in ([], separator), f"turn {i + 1}: extra loss tokens {span[len(ids) :]}"
            if not NATIVE_TOKEN_IDS:  # 4.4: the scheduler puts the text back (4.6 keeps id-backed history)
                assert all(isinstance(m["content"], str) for m in output.messages)
            multi += len(turns) > 1
        assert multi >= 1, "no rollout had a second turn; the tiny agent should end its turns"

    def test_some_turns_called_a_tool_on_the_database(self, rollouts) -> None:
        _, _, outputs, _, _ = rollouts
        # The tiny agent was taught OPEN_TASK's first gold call; its result names the user from the database.
        results = [m["content"] for o in outputs for m in o.messages if m["role"] == "tool"]
        assert any("yusuf_rossi_9620" in r for r in results), results[:3]

    def test_the_user_simulator_wrote_the_turns(self, rollouts) -> None:
        row, _, outputs, _, _ = rollouts
        for output in outputs:
            users = [m["content"] for m in output.messages if m["role"] == "user"]
            assert users[0] != row["messages"][1]["content"]  # the placeholder was replaced at the start
            infos = output.rollout_infos
            assert infos["user_sim"] == "scripted" and infos["turns"] == infos["num_turns"]
            assert infos["termination"] in {"max_turns", "length", "user_stop", "agent_stop", "error_budget"}


class TestToolAndUserMasking:
    """ms-swift's template on a conversation with tool turns: only assistant turns carry loss."""

    def test_tool_and_user_tokens_carry_no_loss(self, tiny_agent_model) -> None:
        from swift.model import get_processor
        from swift.template import TemplateInputs, get_template

        from rewardkit.envs import make_env
        from rewardkit.loop.gold import hermes_call

        template = get_template(get_processor(str(tiny_agent_model)))
        template.set_mode("train")
        with make_env("retail") as env:
            result = env.call("get_order_details", {"order_id": "#W2378156"}).text()
        call = hermes_call("get_order_details", {"order_id": "#W2378156"})
        messages = [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": "Where is my order #W2378156?"},
            {"role": "assistant", "content": call},
            {"role": "tool", "content": result},
            {"role": "assistant", "content": "It was delivered."},
        ]
        encoded = template.encode(TemplateInputs.from_dict({"messages": messages}))
        pairs = zip(encoded["input_ids"], encoded["labels"], strict=True)
        trained = template.tokenizer.decode([token for token, label in pairs if label != -100])
        assert "get_order_details" in trained and "It was delivered." in trained
        assert "Where is my order" not in trained and '"status"' not in trained and "policy" not in trained
