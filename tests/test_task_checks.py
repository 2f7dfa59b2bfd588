"""The task checks every consumer shares: gold arguments against the tools' schemas, and the gold replay.

Real components only: the retail harness on SQLite, the builder on real files, the cached gold
outcomes. A gold call that cannot run leaves the gold state without it, so an agent that does less matches.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _retail_gold import ALL_TASKS, GOLD_FAILS, NO_EVIDENCE, VALID
from conftest import tau2_task as task

from rewardkit.cli import main
from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
from rewardkit.data_builders.tau2_tasks import task_problem as builder_problem
from rewardkit.envs import Domain, get_domain, register_domain
from rewardkit.envs.harness import ToolEnvironment
from rewardkit.envs.mcp_env import MCPToolSpec
from rewardkit.envs.task_verdict import VERDICTS, checked_task, task_goal, task_verdict
from rewardkit.envs.tasks import TaskError, task_problem
from rewardkit.rewards import TaskCompletion
from rewardkit.runs.domains.domain_check import replay_gold
from rewardkit.runs.tasks.task_checks import Seen, rejection

RETAIL = get_domain("retail")
TASKS = RETAIL.tasks()
CANCEL_MISSING = {"name": "cancel_pending_order", "arguments": {"order_id": "#W0000000", "reason": "no longer needed"}}


def with_actions(actions: list[Any], task_id: str = "x") -> dict[str, Any]:
    return task(task_id, "evaluation_criteria.actions", copy.deepcopy(actions))


class TestBundledTasks:
    def test_every_bundled_task_is_either_valid_or_a_known_gold_failure(self) -> None:
        # valid, gold failures and no evidence partition the bundled tasks: none is dropped unaccounted for.
        assert sorted([*VALID, *GOLD_FAILS, *NO_EVIDENCE]) == sorted(ALL_TASKS)
        for tid in VALID:  # the builder's check, and the rewards' (what a run selecting tasks calls)
            assert builder_problem(TASKS[tid], RETAIL) is None and task_verdict("retail", TASKS[tid]).playable, tid
        for tid, (index, code) in GOLD_FAILS.items():
            reason, detail = builder_problem(TASKS[tid], RETAIL) or ("", "")
            assert reason == "gold_fails" and f"actions[{index}]:" in detail and f"({code}: " in detail, detail
            assert task_verdict("retail", TASKS[tid]).problem == (reason, detail)
        for tid in NO_EVIDENCE:  # the gold leaves the database as it was and names nothing to show
            reason, detail = builder_problem(TASKS[tid], RETAIL) or ("", "")
            assert reason == "no_evidence" and "doing nothing reaches it" in detail, detail
            assert task_verdict("retail", TASKS[tid]).problem == (reason, detail)

    def test_the_schema_check_alone_accepts_every_bundled_task(self) -> None:
        # The two failures are failed writes on replay, not arguments the schemas refuse.
        assert [tid for tid in ALL_TASKS if task_problem(TASKS[tid], RETAIL.tools, "retail")] == []


class TestSchemas:
    @pytest.mark.parametrize(
        ("actions", "detail"),
        [
            # a required argument missing: SCHEMA_VIOLATION, nothing runs
            (
                [{"name": "cancel_pending_order", "arguments": {"order_id": "#W6779827"}}],
                "actions[0]: the arguments of 'cancel_pending_order' do not fit its schema (arguments: 'reason'",
            ),
            # a wrong type, on the second action
            (
                [
                    {"name": "calculate", "arguments": {"expression": "1+1"}},
                    {"name": "get_order_details", "arguments": {"order_id": 5}},
                ],
                "actions[1]: the arguments of 'get_order_details' do not fit its schema (order_id: 5 is not of type",
            ),
            # an argument the tool does not take (the schemas forbid additional properties)
            (
                [{"name": "get_order_details", "arguments": {"order_id": "#W1", "force": True}}],
                "actions[0]: the arguments of 'get_order_details' do not fit its schema",
            ),
        ],
    )
    @pytest.mark.parametrize("specs", ["harness", "mcp"])
    def test_arguments_the_schema_refuses(self, actions: list[Any], detail: str, specs: str) -> None:
        # The same check on the harness's ToolSpecs and on specs as an MCP server lists them.
        tools: dict[str, Any] = dict(RETAIL.tools)
        if specs == "mcp":
            tools = {n: MCPToolSpec(n, s.description, dict(s.parameters), s.risk) for n, s in tools.items()}
        found = task_problem(with_actions(actions), tools, "retail")
        assert found is not None and found[0] == "bad_gold_arguments" and detail in found[1], found

    def test_names_alone_check_no_arguments(self) -> None:
        # A collection of names (no specs) keeps the old check: the name only.
        bad = with_actions([{"name": "get_order_details", "arguments": {"order_id": 5}}])
        assert task_problem(bad, frozenset(RETAIL.tools), "retail") is None


class TestRewardsAndScheduler:
    @pytest.mark.parametrize(
        ("cell", "fragment"),
        [
            (with_actions([CANCEL_MISSING]), "actions[0]: the gold write 'cancel_pending_order' fails"),
            (TASKS["105"], "(INSUFFICIENT_FUNDS: Insufficient gift card balance to pay for the price difference)"),
            (json.dumps(TASKS["64"]), "actions[6]: the gold write 'exchange_delivered_order_items' fails"),
        ],
    )
    def test_a_failing_gold_write_is_a_task_error(self, cell: Any, fragment: str) -> None:
        # checked_task is what the simulated_user scheduler calls on each row; the rewards call it through row_task.
        with pytest.raises(TaskError, match="column 'task'") as info:
            checked_task(cell, "column 'task'", "retail")
        assert fragment in str(info.value) and "fix the task in the dataset" in str(info.value)

    def test_doing_nothing_no_longer_scores_one(self) -> None:
        # Task 105's only write fails, so its gold state was the untouched database: silence scored 1.0.
        with pytest.raises(TaskError, match="gold write"):
            TaskCompletion()(["ok"], messages=[[]], task=[TASKS["105"]], domain=["retail"])

    def test_a_failing_gold_read_is_fine(self) -> None:
        # Several tau2 tasks look up a user that does not exist; a read changes nothing. (A gold of reads alone
        # names what the agent must say, else doing nothing would reach it: no_evidence.)
        found = with_actions([{"name": "get_order_details", "arguments": {"order_id": "#W0000000"}}])
        found["evaluation_criteria"]["communicate_info"] = ["not found"]
        assert checked_task(found, "t", "retail") == found

    def test_each_task_replays_once_per_process(self) -> None:
        opened: list[int] = []

        def counting(db_path: Any) -> ToolEnvironment:
            opened.append(1)
            return RETAIL.make_env(db_path)

        domain = register_domain(
            Domain(
                "retail-counted", counting, RETAIL.tools, RETAIL.tasks, RETAIL.splits, RETAIL.policy, RETAIL.stop_tools
            )
        )
        VERDICTS.clear()
        for _ in range(3):  # three batches, two rewards' worth of rows: one gold replay for the one task
            TaskCompletion()(["x"] * 2, messages=[[], []], task=[TASKS["59"]] * 2, domain=[domain.name] * 2)
            checked_task(TASKS["59"], "t", domain.name)
        # One gold replay, cached for the scores and the checks alike. (The rows say none of task 59's expected
        # outputs, so TaskCompletion scores them 0 without replaying the agent's calls.)
        assert len(opened) == 1


class TestOneVerdict:
    @pytest.mark.parametrize(
        ("cell", "reason"),
        [
            (TASKS["105"], "gold_fails"),  # its one write: INSUFFICIENT_FUNDS on a fresh database
            (TASKS["25"], "no_evidence"),  # reads only, and nothing to say
            (with_actions([{"name": "renew_book", "arguments": {}}]), "bad_evaluation_criteria"),  # no such tool
        ],
    )
    def test_every_consumer_reads_the_same_verdict(self, cell: dict[str, Any], reason: str) -> None:
        # The builder's reject, env check's gold row, the generator's rejection and the scheduler's and rewards'
        # TaskError all come from the one verdict: the same reason, and (but for the generator's) the same detail.
        found = task_verdict("retail", cell).problem
        assert found is not None and found[0] == reason
        assert builder_problem(cell, RETAIL) == found
        assert replay_gold(RETAIL, cell).problem == f"{found[0]}: {found[1]}"
        assert (rejection(RETAIL, "retail", cell, Seen()) or ("",))[0] == reason
        with pytest.raises(TaskError) as info:
            checked_task(cell, "t", "retail")
        assert found[1] in str(info.value)

    def test_tools_that_fail_leave_the_task_playable_and_unkept(self) -> None:
        # The first environment cannot open (its server is down): the task is not at fault, so it stays playable,
        # its goal raises what an episode ends on (env_error), and the verdict is judged again next time.
        opened: list[int] = []

        def flaky(db_path: Any) -> ToolEnvironment:
            opened.append(1)
            if len(opened) == 1:
                raise ConnectionError("server down")
            return RETAIL.make_env(db_path)

        domain = register_domain(
            Domain("retail-flaky", flaky, RETAIL.tools, RETAIL.tasks, RETAIL.splits, RETAIL.policy, RETAIL.stop_tools)
        )
        first = task_verdict(domain.name, TASKS["59"])
        assert (
            first.playable
            and first.untested
            and first.problem == ("env_error", "the gold cannot be replayed: server down")
        )
        assert checked_task(TASKS["59"], "t", domain.name) == TASKS["59"]  # judged again: the server is back
        second = task_verdict(domain.name, TASKS["59"])
        assert second.problem is None and not second.untested and second.gold is not None
        assert task_goal(domain.name, TASKS["59"]).state_hash == second.gold.state_hash
        assert task_verdict(domain.name, TASKS["59"]) is second  # kept

    def test_tools_down_for_16_rollouts_at_once_are_asked_once(self) -> None:
        # 16 rollouts of a task start while the tools' server is down: one replay finds it down, the other 15 share
        # that verdict (env_error, untested) rather than each asking the dead server; none is kept.
        opened: list[int] = []

        def down(db_path: Any) -> ToolEnvironment:
            opened.append(1)
            time.sleep(0.2)  # the other rollouts arrive meanwhile
            raise ConnectionError("server down")

        domain = register_domain(
            Domain("retail-down", down, RETAIL.tools, RETAIL.tasks, RETAIL.splits, RETAIL.policy, RETAIL.stop_tools)
        )
        found: list[Any] = []
        threads = [
            threading.Thread(target=lambda: found.append(task_verdict(domain.name, TASKS["59"]))) for _ in range(16)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(opened) == 1 and {v.problem for v in found} == {
            ("env_error", "the gold cannot be replayed: server down")
        }
        with pytest.raises(ConnectionError, match="server down"):  # what the episode ends on: env_error
            task_goal(domain.name, TASKS["59"])
        assert len(opened) == 2  # not kept: asked again

    @pytest.mark.parametrize(
        ("cell", "fragment"),
        [
            (functools.reduce(lambda inner, _: {"a": inner}, range(1000), {}), "not JSON (RecursionError"),
            ({**TASKS["59"], "metadata": {"when": object()}}, "not JSON (TypeError"),
            ({**TASKS["59"], "metadata": {"x": float("nan")}}, "not JSON (ValueError"),
        ],
        ids=["1000-deep", "an-object", "nan"],
    )
    def test_a_cell_json_cannot_hold_is_a_bad_task(self, cell: Any, fragment: str) -> None:
        assert task_verdict("retail", cell).problem[0] == "bad_task"
        with pytest.raises(TaskError, match=re.escape(f"row 1: the task is {fragment}")):
            checked_task(cell, "row 1", "retail")

    def test_the_task_is_judged_as_json_reads_it(self) -> None:
        # A tuple of actions is the list JSON writes: the same task, one verdict, handed back as JSON reads it.
        as_tuple = copy.deepcopy(TASKS["59"])
        as_tuple["evaluation_criteria"]["actions"] = tuple(as_tuple["evaluation_criteria"]["actions"])
        assert task_verdict("retail", as_tuple) is task_verdict("retail", TASKS["59"])
        assert checked_task(as_tuple, "t", "retail") == TASKS["59"]

    def test_an_unplayable_task_has_no_goal(self) -> None:
        with pytest.raises(TaskError, match="gold write"):  # 105: its one write fails on a fresh database
            task_goal("retail", TASKS["105"])


class TestBuilder:
    def test_a_split_listing_an_id_twice_counts_the_repeats(self, tmp_path: Path) -> None:
        (tmp_path / "t.json").write_text(json.dumps([task("a"), task("b")]), encoding="utf-8")
        (tmp_path / "s.json").write_text(json.dumps({"s": ["a", "b", "a", 1, "a"]}), encoding="utf-8")
        rows, report = build_tau2_grpo(
            Tau2Options(domain="retail", split="s", tasks_file=tmp_path / "t.json", split_file=tmp_path / "s.json")
        )
        assert [json.loads(r["task"])["id"] for r in rows] == ["a", "b"]
        # read 5 = written 2 + duplicate_in_split 2 + missing_task 1 (id 1)
        assert report.as_dict() == {"read": 5, "written": 2, "rejected": {"duplicate_in_split": 2, "missing_task": 1}}
        assert [r["detail"] for r in report.rejects if r["reason"] == "duplicate_in_split"] == [
            "the split lists task id 'a' again (item 2; first at item 0)",
            "the split lists task id 'a' again (item 4; first at item 0)",
        ]
        report.check()

    def test_the_cli_writes_gold_failures_to_rejects(self, tmp_path: Path) -> None:
        tasks = [task("ok"), with_actions([CANCEL_MISSING], "broken")]
        (tmp_path / "t.json").write_text(json.dumps(tasks), encoding="utf-8")
        (tmp_path / "s.json").write_text(json.dumps({"s": ["ok", "broken"]}), encoding="utf-8")
        out, rejects, report = tmp_path / "o.jsonl", tmp_path / "r.jsonl", tmp_path / "report.json"
        argv = ["build", "tau2-grpo", "--split", "s", "--tasks-file", str(tmp_path / "t.json")]
        argv += ["--split-file", str(tmp_path / "s.json"), "--out", str(out), "--rejects", str(rejects)]
        argv += ["--report", str(report)]
        assert main(argv) == 0
        assert len(out.read_text(encoding="utf-8").splitlines()) == 1
        (rejected,) = [json.loads(line) for line in rejects.read_text(encoding="utf-8").splitlines()]
        assert rejected["reason"] == "gold_fails" and "NOT_FOUND" in rejected["detail"]
        assert json.loads(report.read_text(encoding="utf-8"))["rejected"] == {"gold_fails": 1}
