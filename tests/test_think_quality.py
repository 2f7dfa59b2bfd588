from __future__ import annotations

import pytest
from conftest import THINK, completion

from rewardkit.config import ConfigError
from rewardkit.rewards import ThinkQuality

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may
# change. rows 0-1 think without banned words or repeats; 2-4 have no think.
CONTRACT = [1.0, 1.0, 0.0, 0.0, 0.0]


def q(think: str, **config: object) -> float | None:
    return ThinkQuality(config=config or None)([completion(think, "{}")])[0]


class TestThinkQuality:
    @pytest.mark.parametrize(
        ("think", "expected", "why"),
        [
            (THINK, 1.0, "ordinary reasoning: distinct trigram ratio > 0.5"),
            ("好", 1.0, "fewer units than n: ratio defined as 1"),
            ("重复" * 50, 0.040816, "100 units, 98 trigrams, 2 distinct: (2/98)/0.5"),
            ("yes " * 20, 0.111111, "20 words, 18 trigrams, 1 distinct: (1/18)/0.5"),
            ("先想<answer>再答", 0.0, "answer tag leaked into think"),
            ('规划是 "plan": [ ... ]', 0.0, "plan JSON field leaked into think"),
            ('"补全后的问题" : "x"', 0.0, "rewrite JSON field leaked into think"),
            ("plan 这个词本身可以出现", 1.0, "the bare word is fine, only a JSON field leaks"),
        ],
    )
    def test_table(self, think: str, expected: float, why: str) -> None:
        assert q(think) == pytest.approx(expected, abs=1e-6)

    def test_missing_or_empty_think_is_zero(self) -> None:
        reward = ThinkQuality()
        assert reward(["<think>\n \n</think>\n\n<answer>\n{}\n</answer>", "<answer>{}</answer>", ""]) == [0.0] * 3

    @pytest.mark.parametrize(
        ("banned", "think"),
        [
            (["敏感"], "这里有敏感内容"),
            (["SECRET"], "this is a secret plan"),
            (["secret"], "ＳＥＣＲＥＴ fullwidth"),
        ],
    )
    def test_banned_keywords_case_and_width_insensitive(self, banned: list[str], think: str) -> None:
        assert q(think, think_quality={"banned": banned}) == 0.0
        assert q("完全无关的正常思考过程", think_quality={"banned": banned}) == 1.0

    def test_thousands_of_banned_words(self) -> None:
        words = [f"禁词{i:05d}" for i in range(5000)]
        reward = ThinkQuality(config={"think_quality": {"banned": words}})
        texts = [completion("正常思考" * 1000 + "禁词04999", "{}"), completion("正常思考" * 1000, "{}")]
        assert reward(texts) == [0.0, pytest.approx(0.002, abs=1e-3)]  # 2nd: 4 distinct trigrams / 3998, / 0.5

    def test_banned_file(self, tmp_path) -> None:
        path = tmp_path / "banned.txt"
        path.write_text("竞品\n\n内部价\n", encoding="utf-8")
        reward = ThinkQuality(config={"think_quality": {"banned_file": str(path)}})
        assert reward([completion("对比竞品的价格", "{}"), completion("查询周报数据", "{}")]) == [0.0, 1.0]

    def test_missing_banned_file_fails_naming_the_key(self, tmp_path) -> None:
        with pytest.raises(ConfigError, match=r"think_quality\.banned_file"):
            ThinkQuality(config={"think_quality": {"banned_file": str(tmp_path / "nope.txt")}})

    def test_ngram_size_is_configurable(self) -> None:
        # "ab" * 10 as words: a b a b ... ; bigrams (a,b),(b,a): 2 distinct / 19 -> /0.5 = 0.2105
        assert q("a b " * 10, think_quality={"repetition_ngram": 2}) == pytest.approx(2 / 19 / 0.5)

    def test_bad_ngram_fails_naming_the_key(self) -> None:
        with pytest.raises(ConfigError, match=r"think_quality\.repetition_ngram"):
            ThinkQuality(config={"think_quality": {"repetition_ngram": 0}})
