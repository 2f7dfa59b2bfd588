"""TaskCompletion and TaskCompletionRate on the 109 valid tau2 retail tasks and on hand-computed cases.

Of the other five (``_retail_gold.py``), 64 and 105 have gold writes that fail on a fresh database, and 25, 57 and 65
have a gold that changes nothing and names nothing to show: the rewards refuse them as dataset bugs (TaskError)
instead of scoring against a gold state that doing less, or nothing, reaches."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
from _retail_gold import VALID

from rewardkit.envs import get_domain, make_env
from rewardkit.envs.outcomes import Goal
from rewardkit.envs.retail.domain import tasks
from rewardkit.envs.retail.tools import TOOLS
from rewardkit.envs.task_verdict import VERDICTS, task_goal
from rewardkit.envs.tasks import TaskError
from rewardkit.rewards import TaskCompletion, TaskCompletionRate
from rewardkit.rewards._episodes import SHAPES
from rewardkit.runs.stats.metrics import task_order

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may
# change. row 0 replays the gold and says its outputs; row 4 ended in user_sim_error.
CONTRACT = [1.0, 0.0, 0.0, 0.0, None]

TASKS = tasks()
Action = dict[str, Any]


def hermes(actions: Sequence[Action], said: Sequence[str]) -> list[dict[str, Any]]:
    """A Qwen-style trajectory: one <tool_call> per assistant turn, each answered by a tool turn."""
    messages = [{"role": "system", "content": "policy"}, {"role": "user", "content": "help me"}]
    for a in actions:
        call = json.dumps({"name": a["name"], "arguments": a["arguments"]})
        messages += [
            {"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"},
            {"role": "tool", "content": "{}"},
        ]
    return [*messages, {"role": "assistant", "content": "All done. " + " ".join(said)}]


def openai(actions: Sequence[Action], said: Sequence[str]) -> list[dict[str, Any]]:
    """An OpenAI-style trajectory: tool_calls with JSON-string arguments, two calls per turn."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "help me"}]
    for start in range(0, len(actions), 2):
        pair = actions[start : start + 2]
        calls = [
            {
                "id": f"c{start + i}",
                "type": "function",
                "function": {"name": a["name"], "arguments": json.dumps(a["arguments"])},
            }
            for i, a in enumerate(pair)
        ]
        messages.append({"role": "assistant", "content": "", "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "{}"} for c in calls]
    return [*messages, *({"role": "assistant", "content": s} for s in said)]


def score(reward: Callable[..., list], task: dict[str, Any], messages: list[dict[str, Any]], **extra: Any) -> float:
    (value,) = reward(["<last turn>"], messages=[messages], task=[json.dumps(task)], domain=["retail"], **extra)
    return value


def live(task: dict[str, Any], goal: Goal) -> dict[str, Any]:
    """A live record of ``task`` that ended at the gold state, its calls not recorded, carrying ``goal``."""
    return {"termination": "user_stop", "state_hash": final_hash(gold(task)), "audit": [], "goal": goal.to_json()}


def gold(task: dict[str, Any]) -> list[Action]:
    return task["evaluation_criteria"]["actions"]


def info(task: dict[str, Any]) -> list[str]:
    return task["evaluation_criteria"]["communicate_info"]


def final_hash(actions: Sequence[Action]) -> str:
    with make_env("retail") as env:
        env.replay(actions)
        return env.state_hash()


def mutations(action: Action) -> list[Action]:
    """Variants of a write with exactly one argument changed, valid where the data allows it."""
    args = action["arguments"]
    env = make_env("retail")
    owner = args.get("user_id")
    if "order_id" in args:
        found = env.call("get_order_details", {"order_id": args["order_id"]})
        owner = found.value["user_id"] if found.ok else None
    user = env.call("get_user_details", {"user_id": owner}).value if owner else {}
    out = []
    for key, value in args.items():
        if key == "reason":
            new: Any = "ordered by mistake" if value == "no longer needed" else "no longer needed"
        elif key == "payment_method_id":
            others = [m for m in user.get("payment_methods", {}) if m != value]
            new = others[0] if others else "gift_card_0000000"
        elif key == "order_id":
            others = [o for o in user.get("orders", []) if o != value]
            new = others[0] if others else "#W0000000"
        elif key == "user_id":
            new = "sofia_rossi_8776" if value != "sofia_rossi_8776" else "yusuf_rossi_9620"
        elif key == "new_item_ids":
            item = env.call("get_item_details", {"item_id": value[0]}).value
            product = next(
                p
                for p in (
                    env.call("get_product_details", {"product_id": pid}).value
                    for pid in json.loads(env.call("list_all_product_types", {}).value).values()
                )
                if item["item_id"] in p["variants"]
            )
            spare = [v for v, d in product["variants"].items() if d["available"] and v not in value]
            new = [spare[0], *value[1:]] if spare else ["0000000000", *value[1:]]
        elif key == "item_ids":
            new = value[:-1] if len(value) > 1 else ["0000000000"]
        else:  # address fields
            new = f"{value} 9"
        out.append({"name": action["name"], "arguments": {**args, key: new}})
    return out


@pytest.mark.parametrize("task_id", sorted(VALID, key=task_order))
class TestEveryTask:
    def test_gold_trajectories_score_one_in_both_forms(self, task_id: str) -> None:
        task = TASKS[task_id]
        for form in (hermes, openai):
            assert score(TaskCompletion(), task, form(gold(task), info(task))) == 1.0, form.__name__
            assert score(TaskCompletionRate(), task, form(gold(task), info(task))) == 1.0, form.__name__

    def test_silence_scores_zero(self, task_id: str) -> None:
        task = TASKS[task_id]
        expected = 0.0 if info(task) else 1.0  # nothing to say: silence is fine
        assert score(TaskCompletion(), task, hermes(gold(task), [])) == expected

    def test_dropping_or_changing_a_write_scores_zero_when_the_state_changes(self, task_id: str) -> None:
        task, reward = TASKS[task_id], TaskCompletion()
        target = final_hash(gold(task))
        changed = 0
        for i, action in enumerate(gold(task)):
            if TOOLS[action["name"]].risk != "write":
                continue
            for variant in [None, *mutations(action)]:
                actions = [*gold(task)[:i], *([variant] if variant else []), *gold(task)[i + 1 :]]
                differs = final_hash(actions) != target
                changed += differs
                assert score(reward, task, hermes(actions, info(task))) == (0.0 if differs else 1.0), variant
        writes_that_work = [a for a in gold(task) if TOOLS[a["name"]].risk == "write"]
        if final_hash([]) != target:  # some gold write succeeds: dropping it must show
            assert changed > 0 and writes_that_work


class TestCommunication:
    @pytest.mark.parametrize(
        ("task_id", "said", "expected"),
        [
            ("76", "Your refund of $1,939.05 is on its way.", 1.0),  # commas removed
            ("89", "It is the TACTILE, White, FULL size one: $226.11", 1.0),  # case-insensitive
            ("89", "It is the tactile white one: $226.11", 0.0),  # 'full' missing
            ("19", "54.04", 0.0),  # '41.64' missing
        ],
    )
    def test_table(self, task_id: str, said: str, expected: float) -> None:
        task = TASKS[task_id]
        assert score(TaskCompletion(), task, hermes(gold(task), [said])) == expected

    def test_an_output_must_sit_in_one_message_not_in_a_tool_call(self) -> None:
        task = TASKS["19"]
        messages = hermes(gold(task), ["54.04"])
        call = '<tool_call>{"name": "calculate", "arguments": {"expression": "41.64"}}</tool_call>'
        messages.insert(-1, {"role": "assistant", "content": call})
        assert score(TaskCompletion(), task, messages) == 0.0


class TestRolloutInfos:
    def test_a_recorded_hash_replaces_the_replay(self) -> None:
        task = TASKS["59"]
        right = {"state_hash": final_hash(gold(task))}
        assert score(TaskCompletion(), task, hermes([], info(task)), rollout_infos=[right]) == 1.0
        wrong = {"state_hash": "0" * 64, "num_turns": 3}
        assert score(TaskCompletion(), task, hermes(gold(task), info(task)), rollout_infos=[wrong]) == 0.0

    @pytest.mark.parametrize(
        ("cls", "expected"),
        [
            (TaskCompletion, 1.0),  # both outputs said, the gold state recorded
            (TaskCompletionRate, 0.6),  # no write in the (empty) audit: (0 + 2 + 1) / (2 writes + 2 outputs + 1)
        ],
    )
    def test_a_live_records_goal_is_read_and_the_task_not_judged_again(self, cls: type, expected: float) -> None:
        # The scheduler judged task 59 and recorded its goal: the reward checks the row's task's shape (once per task
        # cell: every row of every step asks) and reads the goal, and asks for no verdict.
        task = TASKS["59"]
        cell, record = json.dumps(task), live(task, task_goal("retail", task))
        VERDICTS.clear()
        SHAPES.clear()
        (value,) = cls()(
            [""], messages=[hermes([], info(task))], task=[cell], domain=["retail"], rollout_infos=[record]
        )
        assert value == pytest.approx(expected) and len(VERDICTS) == 0 and ("retail", cell) in SHAPES

    def test_another_tasks_goal_is_not_read(self) -> None:
        # Task 0's goal, its state made the fresh one, on a row of task 59 (a server with other tasks, a row put
        # together by hand): read, it would pass an episode that did nothing; 59 is judged, and that episode fails it.
        task, fresh = TASKS["59"], final_hash([])
        goal = replace(task_goal("retail", TASKS["0"]), state_hash=fresh, outputs=(), evidence=())
        record = {**live(task, goal), "state_hash": fresh}
        assert score(TaskCompletion(), task, hermes([], info(task)), rollout_infos=[record]) == 0.0

    @pytest.mark.parametrize("cell", ["{not json", {"id": "x"}, 42])
    def test_a_bad_task_cell_raises_beside_a_live_goal(self, cell: Any) -> None:
        record = live(TASKS["59"], task_goal("retail", TASKS["59"]))
        with pytest.raises(TaskError, match="column 'task' row 0"):
            TaskCompletion()([""], messages=[[]], task=[cell], domain=["retail"], rollout_infos=[record])

    def test_infos_without_a_hash_fall_back_to_replay(self) -> None:
        task = TASKS["59"]
        assert score(TaskCompletion(), task, hermes(gold(task), info(task)), rollout_infos=[{"num_turns": 2}]) == 1.0


@pytest.mark.parametrize("cls", [TaskCompletion, TaskCompletionRate])
@pytest.mark.parametrize(
    ("task", "domain", "error"),
    [("{not json", "retail", TaskError), ({"id": "x"}, "retail", TaskError), (TASKS["0"], "airline", ValueError)],
)
def test_dataset_bugs_raise(cls: type, task: Any, domain: str, error: type) -> None:
    # The contract every reward keeps (pickling, threads, columns, range) is in test_reward_contract.py.
    with pytest.raises(error):
        cls()(["x"], messages=[[]], task=[task], domain=[domain])


def says(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": text} for text in texts]


def calls(name: str, **arguments: Any) -> list[dict[str, Any]]:
    call = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return [{"role": "assistant", "content": f"<tool_call>{call}</tool_call>"}, {"role": "tool", "content": "{}"}]


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


LIVE = get_domain("livestream").tasks()
TRANSFER = calls("transfer_to_human_agents", summary="The user needs a human to undo a cancellation.")
CUT = calls("change_price", sku="SP002", new_price=169)  # t16's declined entry (its user declines)
ASKED = [*CUT, *says("需要您确认改价。")]
BELOW_COST = calls("change_price", sku="SP021", new_price=99, idempotency_key="other")  # t19's refused entry
OVER_LIMIT = calls("change_price", sku="SP020", new_price=180)  # t21's refused entry: the harness answers HARD_GATE
LIMIT_ERROR = "PLATFORM_DISCOUNT_LIMIT: 云南高山普洱茶饼 357g 优惠 88.00 超过现价 268.00 的30%（平台上限）"


# A task whose gold leaves the database as it was is one doing nothing reaches: only what the episode shows can
# tell it done (the outputs, the transfer, the write proposed and declined). Before, each "Goodbye." row scored 1
# on retail 50, and every row of t16 that said 199.00 did.
@pytest.mark.parametrize(
    ("domain", "task", "messages", "expected"),
    [
        ("retail", TASKS["50"], [user("Undo my cancellation."), *says("Goodbye.")], 0.0),
        ("retail", TASKS["50"], [user("Undo my cancellation."), *TRANSFER, *says("Transferring you.")], 1.0),
        # the transfer made, but to summarise nothing: tau2 compares none of its arguments (compare_args: [])
        ("retail", TASKS["50"], [user("Help."), *calls("transfer_to_human_agents", summary="x")], 1.0),
        ("livestream", LIVE["t07"], [user("R101在讲什么？"), *says("Goodbye.")], 0.0),
        ("livestream", LIVE["t07"], [user("R101在讲什么？"), *says("在讲烟酰胺焕亮精华液 30ml。")], 1.0),
        # t16: the price cut proposed, held for approval and declined is the task; saying the price alone is not
        ("livestream", LIVE["t16"], [user("SP002降到169。"), *says("Goodbye.")], 0.0),
        ("livestream", LIVE["t16"], [user("SP002降到169。"), *says("SP002 现价 199.00 元。")], 0.0),
        (
            "livestream",
            LIVE["t16"],
            [user("SP002降到169。"), *ASKED, user("不改了 ###DECLINE###"), *says("好的，不改，仍是 199.00 元。")],
            1.0,
        ),
        ("livestream", LIVE["t16"], [user("SP002降到169。"), *ASKED, *says("仍是 199.00 元。")], 0.0),  # undecided
        (
            "livestream",
            LIVE["t16"],
            [user("SP002降到169。"), *ASKED, user("改吧 ###APPROVE###"), *CUT, *says("已改，原价 199.00 元。")],
            0.0,
        ),
        # t19: a price below cost is refused; the refusal quotes the cost, and making the cut is never right
        ("livestream", LIVE["t19"], [user("SP021改成99。"), *says("I'm sorry, I can't help with that. Goodbye.")], 0.0),
        ("livestream", LIVE["t19"], [user("SP021改成99。"), *says("不能低于成本价 520.00 元。")], 1.0),
        # a refused write attempted is not refused, whatever the harness answered (HARD_GATE here) and whatever key
        ("livestream", LIVE["t19"], [user("SP021改成99。"), *BELOW_COST, *says("不能低于成本价 520.00 元。")], 0.0),
        ("livestream", LIVE["t21"], [user("SP020改成180。"), *OVER_LIMIT, *says(LIMIT_ERROR)], 0.0),
    ],
    ids=[
        "50-goodbye",
        "50-transfer",
        "50-transfer-any-summary",
        "t07-goodbye",
        "t07-said",
        "t16-goodbye",
        "t16-said-only",
        "t16-asked-declined",
        "t16-asked-undecided",
        "t16-asked-approved",
        "t19-refusal-no-figure",
        "t19-refused-with-cost",
        "t19-attempted",
        "t21-attempted-error-repeated",
    ],
)
def test_a_task_whose_gold_changes_nothing_needs_its_evidence(
    domain: str, task: dict[str, Any], messages: list[dict[str, Any]], expected: float
) -> None:
    (value,) = TaskCompletion()([""], messages=[messages], task=[task], domain=[domain])
    assert value == expected
    mua_rl = TaskCompletion(config={"task_completion": {"require_outputs": False}})
    assert mua_rl([""], messages=[messages], task=[task], domain=[domain]) == [expected]  # it presumes a write


BLANK = {**TASKS["57"], "evaluation_criteria": {**TASKS["57"]["evaluation_criteria"], "communicate_info": [" , "]}}


@pytest.mark.parametrize("task", [TASKS["25"], TASKS["57"], TASKS["65"], BLANK], ids=["25", "57", "65", "57-blank"])
@pytest.mark.parametrize("cls", [TaskCompletion, TaskCompletionRate])
def test_a_gold_that_changes_nothing_and_names_no_evidence_is_refused(cls: type, task: dict[str, Any]) -> None:
    # Before, "Goodbye." scored 1.0 on each: the gold state is the fresh one and there is nothing to say (an output
    # that is blank once commas go is in every text).
    with pytest.raises(TaskError, match="leaves the database as it was and names no output, transfer or declined"):
        cls()([""], messages=[says("Goodbye.")], task=[task], domain=["retail"])


STRAY = {"name": "transfer_to_human_agents", "arguments": {"summary": "Anything else, a human can help."}}


# A transfer ends the conversation; on a task whose gold makes none it is a wrong ending, whatever else was right.
# Before, the gold calls, the outputs and a trailing transfer scored 1.0 on retail 7 and 62 (their golds change
# nothing) and on 59 (a write task): GRPO, which must transfer on the transfer tasks, would learn to always transfer.
@pytest.mark.parametrize(
    ("task_id", "transfer", "expected"),
    [("7", False, 1.0), ("7", True, 0.0), ("62", False, 1.0), ("62", True, 0.0), ("59", False, 1.0), ("59", True, 0.0)],
)
@pytest.mark.parametrize("cls", [TaskCompletion, TaskCompletionRate])
def test_a_transfer_the_gold_does_not_make_fails_the_task(cls: type, task_id: str, transfer: bool, expected: float):
    task = TASKS[task_id]
    value = score(cls(), task, hermes([*gold(task), *([STRAY] * transfer)], info(task)))
    assert (value == 1.0) == (expected == 1.0), value  # TaskCompletionRate's 1.0 implies TaskCompletion's
