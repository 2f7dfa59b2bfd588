from __future__ import annotations

from conftest import E5, GOLD, GOOD, THINK, answer, completion, step

from rewardkit.rewards import PLANNING_REWARDS
from rewardkit.rewards._parsing import answer_plan, parse


def test_seven_rewards_parse_each_completion_once() -> None:
    batch = [
        completion(THINK + f" 第{i}条", answer("查看经营周报", step("数据分析专家", "查看经营周报"))) for i in range(8)
    ]
    rewards = [cls() for cls in PLANNING_REWARDS.values()]
    parse.cache_clear()
    answer_plan.cache_clear()
    for reward in rewards:
        reward(batch, solution=[GOLD] * len(batch), experts=[E5] * len(batch))
    info = parse.cache_info()
    assert info.misses == len(batch)  # one split + JSON decode per completion
    assert info.hits > 0
    assert answer_plan.cache_info().misses == 1  # one answer for the eight thinks: one schema validation


def test_cached_parse_is_shared_not_copied() -> None:
    assert parse(GOOD) is parse(GOOD)
