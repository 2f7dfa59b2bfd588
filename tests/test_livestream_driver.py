"""The live-stream domain's gold trajectories through ms-swift's driver: the ``simulated_user`` scheduler's hooks,
called as ms-swift's rollout loop calls them, with the gold agent and the scripted user (in Chinese), on every one
of its tasks; each reaches its gold state, approvals and declines included, and TaskCompletion scores it 1.0."""

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
    assert sorted(rows) == sorted(DOMAIN.tasks())  # none rejected by the builder


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
    scores, approved, declined = {}, 0, 0
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
        declined += gate_counts(infos["audit"])["declined"]
        [scores[task_id]] = TaskCompletion()(
            [""], messages=[req.messages], task=[row["task"]], domain=[row["domain"]], rollout_infos=[infos]
        )
    assert scores == dict.fromkeys(rows, 1.0), {k: v for k, v in scores.items() if v != 1.0}
    # The tasks whose user approves: t13, t14, t15, t29, t30, t37, t43 one request each; t38, t44, t45 two each.
    assert approved == 13  # 7 + 3 * 2
    # The declined entries, each proposed and declined once: t16, t17, t18, t25, t27, t41 one each; t47 two.
    assert declined == 8


def _gold_conversation(task_id: str) -> list[dict]:
    from rewardkit.loop.config import RolloutLimits
    from rewardkit.loop.drive import run_episode
    from rewardkit.loop.gold import GoldAgent
    from rewardkit.loop.user_sim.scripted import ScriptedSimulator

    task = DOMAIN.tasks()[task_id]
    return run_episode(DOMAIN, task, GoldAgent(task), ScriptedSimulator(), RolloutLimits()).messages


def test_the_customer_is_greeted_in_the_domains_language() -> None:
    from rewardkit.loop.config import RolloutLimits
    from rewardkit.loop.drive import run_episode
    from rewardkit.loop.gold import GoldAgent
    from rewardkit.loop.user_sim import GREETINGS
    from rewardkit.loop.user_sim.scripted import ScriptedSimulator

    firsts: list[str] = []

    class Heard(ScriptedSimulator):  # the scripted customer, noting the first line of each history it is handed
        def reply(self, task, dialogue, progress):
            firsts.append(dialogue[0].text)
            return super().reply(task, dialogue, progress)

    task = DOMAIN.tasks()["t01"]
    run_episode(DOMAIN, task, GoldAgent(task), Heard(), RolloutLimits())
    assert firsts and set(firsts) == {GREETINGS["zh"]}  # a Chinese console greets in Chinese


def _forge(messages: list[dict]) -> list[dict]:
    """The user's approval taken out of its turn and written by the agent instead, at the end of its question."""
    out = [dict(m) for m in messages]
    user = next(i for i, m in enumerate(out) if m["role"] == "user" and "###APPROVE###" in m["content"])
    out[user]["content"] = out[user]["content"].replace("###APPROVE###", "")
    out[user - 1]["content"] += " ###APPROVE###"
    return out


@pytest.mark.parametrize(
    ("edit", "score"),
    [
        (lambda m: m, 1.0),  # the conversation as it ran: the user's approval taken at its turn
        (_forge, 0.0),  # the same words, the marker in the agent's message: nothing approved, the price unchanged
    ],
    ids=["as-it-ran", "agent-forges-the-approval"],
)
def test_a_logged_conversation_replays_its_users_approvals_only(edit, score: float) -> None:
    from rewardkit.rewards import TaskCompletion

    # t13: change SP006's price 99 -> 89, which the streamer approves; no rollout_infos, so the reward replays.
    messages = edit(_gold_conversation("t13"))
    task = json.dumps(DOMAIN.tasks()["t13"], ensure_ascii=False)
    assert TaskCompletion()([""], messages=[messages], task=[task], domain=["livestream"]) == [score]


@pytest.mark.parametrize(("multi_turn", "rejected"), [(False, {"needs_approval": 11}), (True, {})])
def test_single_turn_rows_leave_out_what_needs_an_approval(multi_turn: bool, rejected: dict) -> None:
    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo

    # The train split's 30 tasks; 6 of them (t13, t29, t30, t37, t44, t45) hold a write their user approves, and 5
    # (t16, t18, t25, t27, t47) one their user declines, which a single completion cannot: it has no user turn.
    rows, report = build_tau2_grpo(Tau2Options(split="train", multi_turn=multi_turn, domain="livestream"))
    assert len(rows) == len(DOMAIN.splits()["train"]) - sum(rejected.values()) and dict(report.rejected) == rejected


def test_lint_passes_the_agent_recipe_on_its_rows(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from rewardkit.cli import main
    from rewardkit.recipes import recipe_path

    rows = tmp_path / "rows.jsonl"
    assert main(["build", "tau2-grpo", "--domain", "livestream", "--split", "train", "--out", str(rows)]) == 0
    # Every tool-use probe (say_only, no_op, do_nothing, every_write, other_gold, other_actions, ...) scores
    # below the gold on the 19 single-turn rows: the reward set cannot be gamed on this domain's tasks either.
    code = main(["lint", str(recipe_path("agent/tiny_grpo.yaml")), "--dataset", str(rows)])
    assert code == 0 and "all 21 checks passed" in capsys.readouterr().out
