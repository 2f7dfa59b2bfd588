"""Content probes: well-formed answers to the wrong question catch rewards that check the form alone.

Each content-blind reward of ``tests/broken_rewards.py`` keeps every generic, hostile and form check and fails
exactly the content probes ``CONTENT_BLIND`` names; the bundled content rewards catch what they measure and declare
what they do not. No mocks: the kit runs every reward for real, the tau2 ones on the retail database.
"""

from __future__ import annotations

import json
from typing import Any

import broken_rewards as broken
import pytest
from conftest import answer, completion, step
from test_reward_contract import TASKS, _trajectory

from rewardkit.rewards import REWARDS, ExpertMatch, PlanCoverage, RewriteSimilarity
from rewardkit.testing import check_reward
from rewardkit.testing.content import CONTENT_PROBES, NEAR_MISS, content_probes

E = ["数据分析专家", "策略推荐专家", "图片生成专家", "全网搜索专家"]
ANALYSE, ADVISE, DRAW = step(E[0], "分析上月营收"), step(E[1], "推荐三个优化策略"), step(E[2], "生成活动海报")
SEARCH = step(E[3], "搜索竞品价格")
# Three plans of two or three steps, so that every near miss can be built; no row's next gold (its other_gold)
# holds all of its steps, which PlanCoverage (a recall of the gold's steps) would score 1.
PLANS = [
    answer("分析上月营收并推荐策略", ANALYSE, ADVISE),
    answer("推荐策略并生成海报", ADVISE, DRAW),
    answer("分析营收、搜索竞品、生成海报", ANALYSE, SEARCH, DRAW),
]
THINK = "先拆解问题，再把每一步交给最合适的专家。"
PLAN_ROWS = [
    {"solution": json.dumps(p, ensure_ascii=False), "experts": E, "completion": completion(THINK, p)} for p in PLANS
]
# The same with the user's question as a prompt, so that ``unrewritten`` (the rewrite replaced by it) is built too.
PROMPTED = [{**r, "messages": [{"role": "user", "content": "帮我看看"}]} for r in PLAN_ROWS]
TAU2_IDS = ["0", "2", "3"]  # gold writes: an exchange, a return, an item change (three different sets)
TAU2_ROWS = [
    {"messages": _trajectory(TASKS[i]), "task": TASKS[i], "domain": "retail", "completion": ""} for i in TAU2_IDS
]
ROWS_OF = {"ignores_solution": broken.ROWS, "expert_set_only": PLAN_ROWS, "any_write_of_the_gold": TAU2_ROWS}


@pytest.mark.parametrize("name", list(broken.CONTENT_BLIND))
def test_a_content_blind_reward_fails_its_content_probe_and_only_it(name: str) -> None:
    report = check_reward(getattr(broken, name), ROWS_OF[name], time_limit_s=1.0)
    assert {c.name for c in report.failed()} == set(broken.CONTENT_BLIND[name]), report.summary()


def test_the_content_probes_of_a_planning_row() -> None:
    built = content_probes(PROMPTED, tool_use=False)
    # Row 0's gold is the constant (all golds differ: the first), so row 0 gets no constant probe.
    assert set(built[0]) == {"other_gold", *NEAR_MISS} - {"wrong_argument"}
    plan = lambda row: json.loads(row["completion"].split("<answer>\n")[1].split("\n</answer>")[0])  # noqa: E731
    # other_gold: row 0 takes row 1's gold; constant: all golds differ, so the first (row 0's) goes to rows 1 and 2.
    assert built[0]["other_gold"]["completion"] == PLAN_ROWS[1]["completion"]
    assert built[2]["constant"]["completion"] == PLAN_ROWS[0]["completion"]
    # swapped_expert: step 0's 数据分析专家 (used once) becomes the first unused expert, 图片生成专家.
    assert [s["专家"] for s in plan(built[0]["swapped_expert"])["plan"]] == [E[2], E[1]]
    # exchanged_experts: steps 0 and 1 trade experts; the set stays {E0, E1}.
    assert [s["专家"] for s in plan(built[0]["exchanged_experts"])["plan"]] == [E[1], E[0]]
    # dropped_step: the last step whose expert occurs once (step 1) is gone.
    assert plan(built[0]["dropped_step"])["plan"] == [ANALYSE]
    assert plan(built[0]["unrewritten"])["补全后的问题"] == "帮我看看"


def test_dropping_a_step_renumbers_depends_on() -> None:
    gold = answer("三步", ANALYSE, step(E[1], "推荐", depends_on=[0]), step(E[2], "海报", depends_on=[0, 1]))
    rows = [{"completion": completion(THINK, gold), "experts": E}, PLAN_ROWS[0]]
    dropped = content_probes(rows, tool_use=False)[0]["dropped_step"]["completion"]
    # The last step used once is step 2: removed, nothing refers to it, so steps 0 and 1 keep their depends_on.
    assert '"depends_on": [0]' in dropped and "海报" not in dropped
    middle = answer("三步", ANALYSE, step(E[1], "推荐", depends_on=[0]), step(E[1], "海报", depends_on=[0, 1]))
    dropped = content_probes([{"completion": completion(THINK, middle), "experts": E}, PLAN_ROWS[0]], tool_use=False)
    # Only step 0's expert occurs once: it goes; step 1's [0] empties, step 2's [0, 1] becomes [0] (1 moved to 0).
    assert json.loads(dropped[0]["dropped_step"]["completion"].split("<answer>\n")[1].split("\n</answer>")[0])[
        "plan"
    ] == [
        {"专家": E[1], "处理问题": ["推荐"], "depends_on": []},
        {"专家": E[1], "处理问题": ["海报"], "depends_on": [0]},
    ]


def test_tool_use_content_probes_change_the_calls() -> None:
    built = content_probes(TAU2_ROWS, tool_use=True)
    assert set(built[0]) == {"other_gold", "constant", "other_actions", "wrong_argument"} - {"constant"}
    assert broken.write_names(built[0]["wrong_argument"]["messages"]) == broken.write_names(TAU2_ROWS[0]["messages"])
    assert built[0]["wrong_argument"]["messages"] != TAU2_ROWS[0]["messages"]
    # other_actions: row 1's calls (a return) after row 0's prompt, row 0's closing words.
    assert broken.write_names(built[0]["other_actions"]["messages"]) == ["return_delivered_order_items"]


@pytest.mark.parametrize(
    ("reward", "waived"),
    [
        (RewriteSimilarity(), {"swapped_expert", "exchanged_experts", "dropped_step"}),  # scores the rewrite alone
        (ExpertMatch(), {"exchanged_experts", "unrewritten"}),  # the set of experts: blind to who does what
        (PlanCoverage(), {"unrewritten"}),  # the steps, not the rewrite
    ],
    ids=["rewrite_similarity", "expert_match", "plan_coverage"],
)
def test_the_content_rewards_catch_what_they_measure(reward: Any, waived: set[str]) -> None:
    report = check_reward(reward, PROMPTED, checks=["gaming"])
    assert report.passed, report.summary()
    content = {
        c.name.removeprefix("gaming:"): c for c in report.checks if c.name.removeprefix("gaming:") in CONTENT_PROBES
    }
    assert {n for n, c in content.items() if c.detail.startswith("waived")} == waived
    assert set(content) >= {"other_gold", "swapped_expert", "exchanged_experts", "dropped_step", "unrewritten"}


@pytest.mark.parametrize("key", [k for k, cls in REWARDS.items() if "solution" in cls.columns or not cls.columns])
def test_every_declared_content_gap_is_tried_and_still_there(key: str) -> None:
    """Each planning reward on rows where every planning content probe is built: the probes it declares gameable
    are the ones it lets through (waived), and none it declares scores below its gold by now."""
    cls = REWARDS[key]
    if "messages" in cls.columns:  # a tool-use reward: its probes are the contract test's
        pytest.skip("tool-use reward")
    rows = [
        {k: v for k, v in r.items() if k in (*cls.columns, *cls.optional_columns, "completion", "messages")}
        for r in PROMPTED
    ]
    rows = [{**r, "experts": E} for r in rows]  # the near misses need the offered experts
    if key == "answer_format":  # the no-think control's format: the answer block alone
        rows = [{**r, "completion": r["completion"][r["completion"].index("<answer>") :]} for r in rows]
    report = check_reward(cls(), rows, checks=["gaming"])
    assert report.passed, report.summary()
    ran = {c.name.removeprefix("gaming:"): c for c in report.checks}
    declared = {n for n in cls.gameable if n in CONTENT_PROBES}
    assert declared <= set(ran), f"{key} declares {sorted(declared - set(ran))}, never built here"
    waived = {n for n, c in ran.items() if n in CONTENT_PROBES and c.detail.startswith("waived")}
    assert waived == declared, (key, waived, declared)
