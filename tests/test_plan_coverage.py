from __future__ import annotations

import pytest
from conftest import E5, THINK, answer, completion, solution, step

from rewardkit.rewards import PlanCoverage

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may
# change. row 4's gold has no plan: None.
CONTRACT = [1.0, 0.125, 0.0, 0.0, None]

A = ("数据分析专家", "分析上个月的营收")
B = ("策略推荐专家", "推荐3个优化策略")


def pred_of(*steps: dict) -> str:
    return completion(THINK, answer("q", *steps))


def score(pred: str, gold: str, **config: object) -> float | None:
    return PlanCoverage(config=config or None)([pred], solution=[gold], experts=[E5])[0]


# default weights: coverage 0.4, quality 0.3, diversity 0.1, dependency 0.2 (only with gold depends_on)
CASES = [
    (pred_of(step(*A), step(*B)), solution("q", step(*A), step(*B)), 1.0, "identical"),
    (
        pred_of(step(*A), step(*B, depends_on=[0])),
        solution("q", step(*A), step(*B, depends_on=[0])),
        1.0,
        "identical with a dependency",
    ),
    # coverage 1/2, quality 1, diversity 1: (0.4*0.5 + 0.3 + 0.1) / 0.8
    (pred_of(step(*A)), solution("q", step(*A), step(*B)), 0.75, "one of two gold items"),
    # + dependency: gold edge (0,1) unmatched, no predicted edges: F1 = 0 -> (0.2+0.3+0.1+0)/1.0
    (pred_of(step(*A)), solution("q", step(*A), step(*B, depends_on=[0])), 0.6, "missed item and edge"),
    # all items matched but the edge is missing: (0.4+0.3+0.1+0)/1.0
    (pred_of(step(*A), step(*B)), solution("q", step(*A), step(*B, depends_on=[0])), 0.8, "missing edge"),
    # same task under the wrong expert: sim 1.0*0.5 = 0.5 >= 0.5 -> coverage 1, quality 0.5: (0.4+0.15+0.1)/0.8
    (pred_of(step("图片生成专家", A[1])), solution("q", step(*A)), 0.8125, "right task, wrong expert"),
    # two identical items: coverage 1, quality 1, diversity 1 - 1/2: (0.4+0.3+0.05)/0.8
    (pred_of(step(A[0], A[1], A[1])), solution("q", step(*A)), 0.9375, "near-duplicate items"),
    # ratio("生成海报", "分析上个月的营收") = 0 -> nothing matched; diversity 1: 0.1/0.8
    (pred_of(step(A[0], "生成海报")), solution("q", step(*A)), 0.125, "unrelated task"),
    (pred_of(), solution("q"), 1.0, "both plans empty"),
    (pred_of(), solution("q", step(*A)), 0.0, "empty prediction"),
    (pred_of(step(*A)), solution("q"), 0.0, "gold empty, prediction not"),
]


class TestPlanCoverage:
    @pytest.mark.parametrize(("pred", "gold", "expected", "why"), CASES, ids=[c[3] for c in CASES])
    def test_table(self, pred: str, gold: str, expected: float, why: str) -> None:
        assert score(pred, gold) == pytest.approx(expected)

    def test_assignment_is_one_to_one_and_optimal(self) -> None:
        # Greedy would pair the first prediction with its best gold and strand the second;
        # the Hungarian assignment pairs both, so every gold item is covered.
        gold = solution("q", step(A[0], "营收分析"), step(A[0], "营收分析报告"))
        pred = pred_of(step(A[0], "营收分析报告", "营收分析"))
        assert score(pred, gold) == pytest.approx(1.0)

    def test_weights_are_configurable(self) -> None:
        only_coverage = {"weights": {"coverage": 1.0, "quality": 0.0, "diversity": 0.0, "dependency": 0.0}}
        gold = solution("q", step(*A), step(*B))
        assert score(pred_of(step(*A)), gold, plan_coverage=only_coverage) == pytest.approx(0.5)

    def test_fuzzy_expert_names_count_as_the_same_expert(self) -> None:
        assert score(pred_of(step("数据分析 专家", A[1])), solution("q", step(*A))) == pytest.approx(1.0)

    def test_none_without_gold_plan(self) -> None:
        assert score(pred_of(step(*A)), '{"补全后的问题": "q"}') is None

    def test_invalid_answer_scores_zero(self) -> None:
        assert score("no answer at all", solution("q", step(*A))) == 0.0

    def test_all_zero_weights_fail_naming_the_key(self) -> None:
        from rewardkit.config import ConfigError

        zero = {"weights": {"coverage": 0, "quality": 0, "diversity": 0, "dependency": 0}}
        with pytest.raises(ConfigError, match=r"plan_coverage\.weights"):
            PlanCoverage(config={"plan_coverage": zero})
