from __future__ import annotations

import pytest
from conftest import THINK, answer, completion, solution, step

from rewardkit.config import ConfigError
from rewardkit.rewards import RewriteSimilarity

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may
# change. row 4's gold has no rewrite: None.
CONTRACT = [1.0, 0.6, 0.0, 0.0, None]


def pred(rewrite: str) -> str:
    return completion(THINK, answer(rewrite, step("数据分析专家", "x")))


def gold(rewrite: str | None) -> str:
    return solution(rewrite, step("数据分析专家", "x"))


class TestRewriteSimilarity:
    @pytest.mark.parametrize(
        ("p", "g", "expected", "why"),
        [
            ("查看经营周报", "查看经营周报", 1.0, "identical"),
            # ratio: LCS 4 -> 2*4/(4+6) = 0.8; bigrams of gold 查看 看经 经营 营周 周报, pred has 查看 周报: 2/5
            ("查看周报", "查看经营周报", 0.5 * 0.8 + 0.5 * 0.4, "partial Chinese"),
            # ratio 2*18/(18+22) = 0.9; all three gold words present: coverage 1
            ("Show the weekly report", "show weekly report", 0.5 * 0.9 + 0.5 * 1.0, "English, case-folded"),
            ("ｓｈｏｗ　weekly report", "show weekly report", 1.0, "fullwidth folds to ASCII"),
            ("", "查看经营周报", 0.0, "empty rewrite"),
        ],
    )
    def test_table(self, p: str, g: str, expected: float, why: str) -> None:
        assert RewriteSimilarity()([pred(p)], solution=[gold(g)]) == [pytest.approx(expected, abs=1e-6)]

    def test_none_when_gold_has_no_rewrite(self) -> None:
        reward = RewriteSimilarity()
        assert reward([pred("x"), pred("x"), pred("x")], solution=[gold(None), None, gold("")]) == [None, None, None]

    def test_invalid_answer_scores_zero(self) -> None:
        assert RewriteSimilarity()(["<think>\nx\n</think>\n\n<answer>\n{\n</answer>"], solution=[gold("q")]) == [0.0]

    @pytest.mark.parametrize(("alpha", "expected"), [(1.0, 0.8), (0.0, 0.4), (0.25, 0.25 * 0.8 + 0.75 * 0.4)])
    def test_alpha_blend(self, alpha: float, expected: float) -> None:
        reward = RewriteSimilarity(config={"rewrite_similarity": {"alpha": alpha}})
        assert reward([pred("查看周报")], solution=[gold("查看经营周报")]) == [pytest.approx(expected)]

    def test_char_units(self) -> None:
        # chars of gold: 查 看 经 营 周 报 (6); pred has 查 看 周 报: 4/6
        reward = RewriteSimilarity(config={"rewrite_similarity": {"alpha": 0.0, "cjk_units": "char"}})
        assert reward([pred("查看周报")], solution=[gold("查看经营周报")]) == [pytest.approx(4 / 6)]

    def test_malformed_gold_fails_loudly(self) -> None:
        with pytest.raises(ValueError, match="column 'solution'"):
            RewriteSimilarity()([pred("x")], solution=["{not json"])

    def test_bad_alpha_names_the_key(self) -> None:
        with pytest.raises(ConfigError, match=r"rewrite_similarity\.alpha"):
            RewriteSimilarity(config={"rewrite_similarity": {"alpha": 1.5}})
