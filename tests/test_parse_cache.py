from __future__ import annotations

from conftest import E5, GOLD, GOOD, THINK, answer, completion, step

from rewardkit.rewards import PLANNING_REWARDS
from rewardkit.rewards._parsing import COMPLETIONS, answer_plan, parse, parse_all, read_plan, read_plans
from rewardkit.rewards._schema import load_schema


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


def test_a_batch_is_read_once_per_batch_and_equals_each_completion_read_alone() -> None:
    schema = load_schema("zh")
    batch = [GOOD, "no tags at all", completion(THINK, "{broken"), GOOD]
    COMPLETIONS.clear()
    parses, plans = parse_all(batch), read_plans(batch, schema)
    assert parses == [parse(t) for t in batch] and plans == [read_plan(t, schema) for t in batch]
    assert plans[0] is not None and plans[1] is None and plans[2] is None  # a plan; no answer; broken JSON
    misses = parse.cache_info().misses
    assert parse_all(list(batch)) is parses and read_plans(list(batch), schema) is plans  # an equal batch: one lookup
    assert parse.cache_info().misses == misses  # no completion read again
    COMPLETIONS.clear()  # the batch goes with the completions' cache
    assert parse_all(batch) is not parses and parse_all(batch) == parses
