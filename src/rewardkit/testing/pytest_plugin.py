"""pytest plugin: the reward contract as the ``reward_contract`` fixture (see docs/testing.md).

Loaded in every pytest run of an environment where rewardkit is installed (the ``pytest11`` entry point), so it
imports nothing but pytest at module level; the kit itself is imported when a test asks for the fixture.

    def test_my_reward(reward_contract):
        reward_contract(MyReward(), rows=[{"solution": "42", "completion": "<answer>42</answer>"}])

The fixture runs :func:`rewardkit.testing.check_reward` and fails the test naming each failed check. Options go
as keyword arguments, or for every call of a test with ``@pytest.mark.reward_contract(margin=0.2, ...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

MARKER = "reward_contract"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**options): default keyword options of the reward_contract fixture "
        "(range, allow_none, margin, time_limit_s, checks, skip, tool_use, gameable, isolate, draws, check_time_s)",
    )


@pytest.fixture
def reward_contract(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``reward_contract(reward, rows, **options)``: check the reward contract, fail naming each broken check,
    return the :class:`rewardkit.testing.Report` when all pass."""
    defaults: dict[str, Any] = {}
    for mark in reversed(list(request.node.iter_markers(MARKER))):  # the closest marker wins
        defaults.update(mark.kwargs)

    def run(reward: Callable[..., Any], rows: Sequence[Mapping[str, Any]], **options: Any) -> Any:
        from rewardkit.testing import check_reward

        report = check_reward(reward, rows, **{**defaults, **options})
        if not report.passed:
            pytest.fail(report.summary(), pytrace=False)
        return report

    return run
