"""Checks every reward must pass: pickling, threads, extra kwargs, range."""

from __future__ import annotations

import math
import pickle
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from conftest import E5, GOLD, GOOD, THINK, answer, completion, step

BATCH = [
    GOOD,
    completion(THINK, answer("查看周报", step("策略推荐专家", "推荐策略"))),
    "garbage <think> no close",
    "",
]
COLUMNS: dict[str, Any] = {"solution": [GOLD] * len(BATCH), "experts": [E5] * len(BATCH)}


class RewardContract:
    reward_cls: ClassVar[type]

    def make(self, **config: Any) -> Any:
        return self.reward_cls(config=config or None)

    def test_pickle_roundtrip_scores_identically(self) -> None:
        reward = self.make()
        clone = pickle.loads(pickle.dumps(reward))
        assert clone(BATCH, **COLUMNS) == reward(BATCH, **COLUMNS)

    def test_threads_agree_with_serial(self) -> None:
        reward = self.make()
        expected = reward(BATCH, **COLUMNS)
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda _: reward(BATCH, **COLUMNS), range(64)))
        assert all(r == expected for r in results)

    def test_unknown_kwargs_are_ignored(self) -> None:
        reward = self.make()
        extra = {"trainer_state": object(), "messages": [[]] * len(BATCH), "foo": [1] * len(BATCH)}
        assert reward(BATCH, **COLUMNS, **extra) == reward(BATCH, **COLUMNS)

    def test_one_finite_score_in_range_per_completion(self) -> None:
        scores = self.make()(BATCH, **COLUMNS)
        assert len(scores) == len(BATCH)
        for s in scores:
            assert s is None or (math.isfinite(s) and 0.0 <= s <= 1.0)

    def test_logged_name_is_the_class_name(self) -> None:
        # ms-swift logs rewards/<ClassName>/mean
        assert type(self.make()).__name__ == self.reward_cls.__name__
