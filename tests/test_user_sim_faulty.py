"""The faulty simulator makes the mistakes it is told to, and records them; the loop's review finds them and does
what ``rollout.user_review`` says."""

from __future__ import annotations

import pytest

from rewardkit.envs import get_domain
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episode, run_episodes
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_sim.faulty import FAULTS, FaultySimulator
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards import TaskCompletion

RETAIL = get_domain("retail")
TASK = RETAIL.tasks()["0"]  # an exchange: the gold agent's calls, then its outputs; the user answers in between


def play(simulator: FaultySimulator, review: str | None) -> object:
    return run_episode(RETAIL, TASK, GoldAgent(TASK), simulator, RolloutLimits(user_review=review))


def test_rate_zero_is_the_honest_simulator() -> None:
    honest = play(FaultySimulator(ScriptedSimulator(), rate=0.0), "count")
    plain = run_episode(RETAIL, TASK, GoldAgent(TASK), ScriptedSimulator(), RolloutLimits())
    assert honest.messages == plain.messages and honest.infos.user_flags == ()


# (the one kind it may make, what the review records), with rate 1: every episode gets its mistake where it fits
MADE = [
    ("unseen_fact", "lee.k@example.org"),  # the wording seed 3 draws
    ("role_break", None),
    ("wrong_language", None),
]


@pytest.mark.parametrize(("kind", "evidence"), MADE)
def test_each_mistake_is_made_recorded_and_flagged(kind: str, evidence: str | None) -> None:
    simulator = FaultySimulator(ScriptedSimulator(), kinds=[kind], rate=1.0, seed=3)
    result = play(simulator, "count")
    assert simulator.injected == {"0": kind}
    flags = [f for f in result.infos.user_flags if f["kind"] == kind]
    assert flags and (evidence is None or flags[0]["evidence"] == evidence)


def test_exclude_ends_the_episode_as_a_simulator_mistake_and_the_reward_leaves_it_out() -> None:
    result = play(FaultySimulator(ScriptedSimulator(), kinds=["role_break"], rate=1.0), "exclude")
    assert result.infos.termination == "user_sim_mistake" and "role_break" in result.infos.error
    cells = {"messages": [result.messages], "task": [TASK], "domain": ["retail"]}
    assert TaskCompletion()([""], **cells, rollout_infos=[result.infos]) == [None]


def test_off_reviews_nothing() -> None:
    result = play(FaultySimulator(ScriptedSimulator(), kinds=["role_break"], rate=1.0), "off")
    assert result.infos.user_flags == () and result.infos.termination != "user_sim_mistake"


def test_the_same_seed_makes_the_same_mistakes() -> None:
    tasks = list(RETAIL.tasks().values())[:12]
    made = []
    for _ in range(2):
        simulator = FaultySimulator(ScriptedSimulator(), rate=0.5, seed=7)
        run_episodes(RETAIL, tasks, GoldAgent, simulator, RolloutLimits(user_review="count"), workers=4)
        made.append(simulator.injected)
    assert made[0] == made[1] and 0 < len(made[0]) < 12  # about half of the 12 episodes, never none or all here


@pytest.mark.parametrize(("kinds", "rate"), [(["typo"], 0.2), (list(FAULTS), 1.5)])
def test_a_kind_it_does_not_know_or_a_rate_outside_0_1_is_refused(kinds: list[str], rate: float) -> None:
    with pytest.raises(ValueError, match="kinds from premature_stop"):
        FaultySimulator(ScriptedSimulator(), kinds=kinds, rate=rate)


def test_the_config_wraps_the_simulator_only_with_a_fault_rate() -> None:
    from rewardkit.config import ConfigError
    from rewardkit.loop.user_sim.config import UserSimConfig, load_user_sim_config, make_simulator

    assert make_simulator(UserSimConfig(), RETAIL).name == "scripted"
    faulty = make_simulator(UserSimConfig(fault_rate=0.2, fault_seed=4), RETAIL)
    assert isinstance(faulty, FaultySimulator) and (faulty.rate, faulty.seed, faulty.name) == (
        0.2,
        4,
        "faulty(scripted)",
    )
    with pytest.raises(ConfigError, match="fault_rate"):
        load_user_sim_config({"fault_rate": 1.5}, "test")
