"""The live-stream domain's gold trajectories through ms-swift's driver: the ``simulated_user`` scheduler's hooks,
called as ms-swift's rollout loop calls them, with the gold agent and the scripted user (in Chinese), on every one
of the 47 tasks; each reaches its gold state, approvals included, and TaskCompletion scores it 1.0."""

from __future__ import annotations

import json

import pytest

from rewardkit.envs import get_domain

DOMAIN = get_domain("livestream")
MAX_TURNS = 20


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo

    out = {}
    for split in ("train", "test"):
        built, _ = build_tau2_grpo(Tau2Options(split=split, multi_turn=True, domain="livestream"))
        out.update({json.loads(r["task"])["id"]: r for r in built})
    return out


def test_every_task_is_built(rows: dict[str, dict]) -> None:
    assert sorted(rows) == sorted(DOMAIN.tasks())  # 47 tasks, none rejected by the builder


def test_every_gold_trajectory_completes_through_the_scheduler(rows: dict[str, dict]) -> None:
    from swift.infer_engine.protocol import ChatCompletionResponseChoice, ChatMessage, RolloutInferRequest
    from swift.rollout.agent_loop import invoke_async_hook

    from rewardkit.envs.approvals import gate_counts
    from rewardkit.loop.config import RolloutLimits
    from rewardkit.loop.gold import GoldAgent
    from rewardkit.loop.user_sim.scripted import ScriptedSimulator
    from rewardkit.plugins.scheduler import SimulatedUserScheduler
    from rewardkit.rewards import TaskCompletion

    limits = RolloutLimits(max_turns=MAX_TURNS)
    sched = SimulatedUserScheduler(max_turns=MAX_TURNS, simulator=ScriptedSimulator(), limits=limits)
    scores, approved = {}, 0
    for task_id, row in rows.items():
        task = json.loads(row["task"])
        req = RolloutInferRequest(messages=[dict(m) for m in row["messages"]], data_dict=row, uuid=f"ls-{task_id}")
        invoke_async_hook(sched.on_trajectory_start([req]))
        agent, result = GoldAgent(task), {}
        for turn in range(1, MAX_TURNS + 1):
            text = agent(req.messages)
            req.messages.append({"role": "assistant", "content": text})
            choice = ChatCompletionResponseChoice(
                index=0, message=ChatMessage(role="assistant", content=text), finish_reason="stop", token_ids=[1]
            )
            result = invoke_async_hook(sched.on_turn_end(req, choice, turn))
            if result["done"]:
                break
            sched.step(req, choice, turn)
        infos = result["rollout_infos"]
        approved += gate_counts(infos["audit"])["approved"]
        [scores[task_id]] = TaskCompletion()([""], messages=[req.messages], task=[row["task"]],
                                             domain=[row["domain"]], rollout_infos=[infos])  # fmt: skip
    assert scores == dict.fromkeys(rows, 1.0), {k: v for k, v in scores.items() if v != 1.0}
    # The tasks whose user approves: t13, t14, t15, t29, t30, t37, t43 one request each; t38, t44, t45 two each.
    assert approved == 13  # 7 + 3 * 2
