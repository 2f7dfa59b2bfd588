"""UserSimFailure: 1.0 exactly when the episode's simulated user failed, whatever else the row holds."""

from __future__ import annotations

import pytest

from rewardkit.envs.termination import Termination
from rewardkit.rewards import UserSimFailure

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may change.
# Row 4's rollout_infos ended in user_sim_error; the others have no termination.
CONTRACT = [0.0, 0.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize("ending", list(Termination), ids=lambda t: t.value)
def test_only_the_simulators_failure_scores_one(ending: Termination) -> None:
    # As stored (a string) and as the enum: 1.0 iff user_sim_error, every other ending 0.0.
    infos = [{"termination": ending.value}, {"termination": ending}]
    expected = float(ending is Termination.USER_SIM_ERROR)
    assert UserSimFailure()(["", ""], rollout_infos=infos) == [expected, expected]


@pytest.mark.parametrize("infos", [None, [None, None], [{}, {"num_turns": 3}]], ids=["no-column", "nulls", "no-ending"])
def test_rows_without_an_ending_score_zero(infos: list | None) -> None:
    extra = {} if infos is None else {"rollout_infos": infos}
    assert UserSimFailure()(["a", "b"], **extra) == [0.0, 0.0]
