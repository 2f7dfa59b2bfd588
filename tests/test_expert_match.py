from __future__ import annotations

import pytest
from conftest import E5, THINK, answer, completion, solution, step

from rewardkit.rewards import ExpertMatch
from rewardkit.rewards._parsing import GoldError

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may
# change. row 1 names the wrong expert; row 4's gold has no plan: None.
CONTRACT = [1.0, 0.0, 0.0, 0.0, None]

E8 = [*E5, "人群运营专家", "关键词配置专家", "Data Analyst"]


def plan_of(*experts: str) -> str:
    return completion(THINK, answer("q", *(step(e, f"任务{i}") for i, e in enumerate(experts))))


def gold_of(*experts: str) -> str:
    return solution("q", *(step(e, "t") for e in experts))


class TestExpertMatch:
    @pytest.mark.parametrize(
        ("pred", "gold", "experts", "expected", "why"),
        [
            (["数据分析专家"], ["数据分析专家"], E5, 1.0, "exact set"),
            (["策略推荐专家", "数据分析专家"], ["数据分析专家", "策略推荐专家"], E5, 1.0, "order is not judged"),
            (["数据分析专家"], ["数据分析专家", "策略推荐专家"], E5, 2 / 3, "F1 = 2*1/(1+2)"),
            (["数据分析专家", "图片生成专家"], ["数据分析专家"], E5, 2 / 3, "one extra: 2*1/(2+1)"),
            (["数据分析专家", "数据分析专家"], ["数据分析专家"], E5, 1.0, "duplicates collapse"),
            (["数据分析专家", "财务顾问专家"], ["数据分析专家"], E5, 0.0, "hallucinated expert"),
            (["数据分析 专家\u200b"], ["数据分析专家"], E5, 1.0, "whitespace and zero-width removed"),
            (["ｄａｔａ ａｎａｌｙｓｔ"], ["Data Analyst"], E8, 1.0, "fullwidth + case folded by NFKC"),
            (["数据分析师专家"], ["数据分析专家"], E5, 1.0, "fuzzy: ratio 2*6/(7+6) = 92.3 >= 85"),
            (["分析专家"], ["数据分析专家"], E5, 0.0, "fuzzy: ratio 2*4/(4+6) = 80 < 85 -> hallucinated"),
            (["人群运营专家"], ["数据分析专家"], E8, 0.0, "in the list but wrong: F1 0"),
            ([], ["数据分析专家"], E5, 0.0, "empty plan vs gold: F1 0/(0+1)"),
            ([], [], E5, 1.0, "both empty"),
        ],
    )
    def test_table(self, pred: list[str], gold: list[str], experts: list[str], expected: float, why: str) -> None:
        reward = ExpertMatch()
        assert reward([plan_of(*pred)], solution=[gold_of(*gold)], experts=[experts]) == [pytest.approx(expected)]

    def test_each_row_is_judged_against_its_own_list(self) -> None:
        # 人群运营专家 exists only in the later period's list.
        texts = [plan_of("人群运营专家"), plan_of("人群运营专家")]
        golds = [gold_of("策略推荐专家"), gold_of("人群运营专家")]
        assert ExpertMatch()(texts, solution=golds, experts=[E5, E8]) == [0.0, 1.0]

    def test_experts_column_may_be_a_json_string(self) -> None:
        import json

        score = ExpertMatch()([plan_of("数据分析专家")], solution=[gold_of("数据分析专家")], experts=[json.dumps(E5)])
        assert score == [1.0]

    def test_threshold_is_configurable(self) -> None:
        strict = ExpertMatch(config={"expert_match": {"fuzzy_threshold": 95}})
        assert strict([plan_of("数据分析师专家")], solution=[gold_of("数据分析专家")], experts=[E5]) == [0.0]

    def test_none_without_gold_plan(self) -> None:
        score = ExpertMatch()([plan_of("数据分析专家")] * 2, solution=[None, '{"补全后的问题": "q"}'], experts=[E5] * 2)
        assert score == [None, None]

    def test_invalid_answer_scores_zero(self) -> None:
        assert ExpertMatch()(["<answer>{</answer>"], solution=[gold_of("数据分析专家")], experts=[E5]) == [0.0]

    def test_gold_expert_outside_the_list_fails_loudly(self) -> None:
        with pytest.raises(GoldError, match="not in the row's 'experts' list"):
            ExpertMatch()([plan_of("数据分析专家")], solution=[gold_of("外星专家")], experts=[E5])
