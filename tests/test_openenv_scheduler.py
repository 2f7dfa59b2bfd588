"""ms-swift's own OpenEnv scheduler (``plugins/openenv_scheduler.py``: ``rewardkit_openenv``) on a real `rewardkit env
serve --openenv` server: ms-swift's ``run_multi_turn`` (the colocate driver), its transformers engine sampling from the
tiny Qwen3, OpenEnv's own client, and ``encode_sample`` (what GRPO trains on).

Every assistant turn's sampled ids must appear verbatim among the loss tokens, and nothing else may carry loss but the
template's separator after the end token: the customer's turns and the tool results carry none. Runs in the ms-swift
4.6 job, whose stack holds the ``openenv`` package (`make test-compat`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv")  # the ms-swift 4.6 job's stack: constraints/swift-4.6.txt

from _tiny_agent import OPEN_TASK, short_rows
from openenv_servers import served
from test_multi_turn_tokens import loss_spans

from rewardkit.envs import get_domain
from rewardkit.envs.tasks import task_digest
from rewardkit.errors import UserError

pytestmark = [pytest.mark.compat, pytest.mark.openenv]


def scheduler(**kwargs: Any) -> Any:
    from rewardkit.plugins.openenv_scheduler import OpenEnvUserScheduler

    return OpenEnvUserScheduler(**kwargs)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with served(tmp_path_factory.mktemp("openenv")) as (url, _):
        yield url


def drive(model: Path, url: str, rows: list[dict[str, Any]], max_turns: int = 3) -> tuple[Any, ...]:
    """``rows`` through ms-swift's colocate loop with the scheduler on ``url``: the requests, their outputs, each
    rollout's sampled ids per turn, and the trainer's template."""
    from swift.infer_engine import TransformersEngine
    from swift.infer_engine.protocol import RequestConfig, RolloutInferRequest, RolloutOutput
    from swift.model import get_model_processor
    from swift.rollout.agent_loop import invoke_async_hook, run_multi_turn
    from swift.template import get_template

    processor_model, processor = get_model_processor(str(model))
    template = get_template(processor)
    template.set_mode("train")
    engine = TransformersEngine(processor_model, template=copy.copy(template), max_batch_size=0)
    sched = scheduler(max_turns=max_turns, tokenizer=engine.tokenizer, template=template)
    requests = [
        RolloutInferRequest(
            messages=copy.deepcopy(row["messages"]), data_dict={**row, "env_config": {"base_url": url}}, uuid=f"r{i}"
        )
        for i, row in enumerate(rows)
    ]
    sampled: dict[str, list[list[int]]] = {r.uuid: [] for r in requests}
    config = RequestConfig(max_tokens=96, temperature=1.0, return_details=True)

    def rollout(batch, cfg):
        with template.generate_context():
            outs = engine.infer(batch, cfg, use_tqdm=False)
        for request, out in zip(batch, outs, strict=True):
            sampled[request.uuid].append(list(out.choices[0].token_ids))
        return [RolloutOutput(response=o) for o in outs]

    invoke_async_hook(sched.on_trajectory_start(requests))
    outputs = run_multi_turn(requests, rollout(requests, config), sched, rollout, config, max_turns=max_turns)
    return requests, outputs, sampled, template, sched


@pytest.fixture(scope="module")
def rollouts(tiny_agent_model: Path, server: str):
    rows = short_rows([OPEN_TASK]) * 6
    return rows[0], *drive(tiny_agent_model, server, rows)


class TestTokenAudit:
    def test_training_ids_are_the_sampled_ids_in_every_turn(self, rollouts) -> None:
        from swift.rl_core.data import OnPolicySample
        from swift.rlhf_trainers.utils import encode_sample

        row, requests, outputs, sampled, template, _ = rollouts
        separator = template.tokenizer.encode("\n", add_special_tokens=False)  # Qwen's chat_sep after <|im_end|>
        multi = 0
        for request, output in zip(requests, outputs, strict=True):
            sample = OnPolicySample(messages=copy.deepcopy(row["messages"]))
            sample.apply_rollout_output(rollout_output=output)
            encoded = encode_sample(sample, template)
            spans = loss_spans(encoded["input_ids"], encoded["labels"])
            turns = sampled[request.uuid]
            assert output.rollout_infos["num_turns"] == len(turns)
            # One loss span per assistant turn: system, customer and tool tokens carry none.
            assert len(spans) == len(turns)
            for i, (span, ids) in enumerate(zip(spans, turns, strict=True)):
                assert span[: len(ids)] == ids, f"turn {i + 1}: trained ids differ from sampled ids"
                assert span[len(ids) :] in ([], separator), f"turn {i + 1}: extra loss tokens {span[len(ids) :]}"
            multi += len(turns) > 1
        assert multi >= 1, "no rollout had a second turn; the tiny agent should end its turns"

    def test_tool_results_and_the_customer_come_back_as_their_own_roles(self, rollouts) -> None:
        row, _, outputs, _, _, _ = rollouts
        roles = {m["role"] for o in outputs for m in o.messages}
        # The tiny agent was taught OPEN_TASK's first gold call: its result names the user from the server's database.
        results = [m["content"] for o in outputs for m in o.messages if m["role"] == "tool"]
        assert any("yusuf_rossi_9620" in r for r in results), results[:3]
        assert roles <= {"system", "user", "assistant", "tool"}
        for output in outputs:
            users = [m["content"] for m in output.messages if m["role"] == "user"]
            assert users[0] != row["messages"][1]["content"]  # the server's customer opened, not the placeholder
            assert output.messages[0] == row["messages"][0]  # the row's system prompt stays

    def test_the_record_is_the_servers_and_the_reward_reads_it(self, rollouts) -> None:
        from rewardkit.rewards.task_completion import TaskCompletion

        row, _, outputs, _, _, sched = rollouts
        infos = [o.rollout_infos for o in outputs]
        # Three turns at most: the server ends the episode at the third (max_turns travels with it) or before.
        assert all(
            i["termination"] in {"max_turns", "length", "user_stop", "agent_stop", "error_budget"} for i in infos
        )
        assert all(i["user_sim"] == "scripted" and i["turns"] == i["num_turns"] for i in infos)
        scores = TaskCompletion()(
            completions=[""] * len(infos),
            messages=[o.messages for o in outputs],
            task=[row["task"]] * len(infos),
            domain=["retail"] * len(infos),
            rollout_infos=infos,
        )
        assert all(s in (0.0, 1.0) for s in scores)  # finite, read from the server's record
        assert sched.sessions == {} and sched._envs == {}  # every session closed at its end


@pytest.mark.parametrize(
    ("env_config", "rollout", "fix"),
    [
        ({}, {}, "env_config.base_url, or set rollout.env_servers"),  # no server named anywhere
        ({"base_url": "http://127.0.0.1:9"}, {"drop": "task"}, "a 'task' column or env_config.reset_kwargs.task_id"),
        ({"base_url": "http://127.0.0.1:9"}, {"drop": "domain"}, "needs its 'domain' column too"),
    ],
)
def test_a_row_that_names_no_server_or_task_is_refused_naming_the_fix(env_config, rollout, fix) -> None:
    row = {**short_rows([OPEN_TASK])[0], "env_config": env_config}
    row.pop(rollout.get("drop", ""), None)
    with pytest.raises(UserError, match=fix.replace("(", r"\(").replace(".", r"\.")):
        scheduler(max_turns=2).env_config(row)


def test_a_rows_task_becomes_the_reset_with_its_digest() -> None:
    row = {**short_rows([OPEN_TASK])[0], "env_config": {"base_url": "http://127.0.0.1:9"}}
    task = get_domain("retail").tasks()[OPEN_TASK]
    config = scheduler(max_turns=2).env_config(row)
    assert config["reset_kwargs"] == {"task_id": OPEN_TASK, "task_sha256": task_digest(task)}
    assert json.loads(row["task"])["id"] == OPEN_TASK


def test_a_dead_server_ends_each_episode_as_env_error_and_past_the_share_stops_the_run(
    tiny_agent_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rewardkit.plugins.scheduler import SimulatorUnavailable
    from rewardkit.rewards.task_completion import TaskCompletion

    rows = short_rows([OPEN_TASK]) * 2
    # The default share (0.5): 2 of 2 episodes lost stops the run, naming the server and the fix.
    with pytest.raises(SimulatorUnavailable, match=r"2 of 2 episodes in this batch lost http://127\.0\.0\.1:9"):
        drive(tiny_agent_model, "http://127.0.0.1:9", rows, max_turns=2)
    # Every episode may fail (max_failed_share 1.0): each ends as env_error, left out of training, not scored 0.
    config = tmp_path / "config.yaml"
    config.write_text("rollout:\n  max_failed_share: 1.0\n", encoding="utf-8")
    monkeypatch.setenv("REWARDKIT_CONFIG", str(config))
    _, outputs, sampled, _, sched = drive(tiny_agent_model, "http://127.0.0.1:9", rows, max_turns=2)
    infos = [o.rollout_infos for o in outputs]
    assert [i["termination"] for i in infos] == ["env_error", "env_error"]
    assert all("ConnectionError" in i["error"] and "127.0.0.1:9" in i["error"] for i in infos)
    assert all(len(t) == 1 for t in sampled.values())  # one turn on the row's own prompt, then the end
    scores = TaskCompletion()(
        completions=["", ""],
        messages=[o.messages for o in outputs],
        task=[rows[0]["task"]] * 2,
        domain=["retail"] * 2,
        rollout_infos=infos,
    )
    assert scores == [None, None]
    assert sched.sessions == {} and sched._envs == {}
