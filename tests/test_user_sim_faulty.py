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
    ("unseen_fact", "312.40"),  # the wording seed 3 draws
    ("role_break", None),
    ("wrong_language", None),
    ("no_stop", None),  # done, then another question for every stop, to the turn limit
    ("loop", None),  # the previous message again
    ("cut_reply", None),  # half a reply, marked cut
    ("no_request", None),  # an opening that asks nothing, and no reply after that says what it wants
]


@pytest.mark.parametrize(("kind", "evidence"), MADE)
def test_each_mistake_is_made_recorded_and_flagged(kind: str, evidence: str | None) -> None:
    simulator = FaultySimulator(ScriptedSimulator(), kinds=[kind], rate=1.0, seed=3)
    result = play(simulator, "count")
    assert result.infos.user_sim_fault == kind
    flags = [f for f in result.infos.user_flags if f["kind"] == kind]
    assert flags and (evidence is None or flags[0]["evidence"] == evidence)


def test_a_user_that_never_stops_leaves_the_done_episode_out_of_training() -> None:
    # The gold agent completes task 0; the customer never stops. Under exclude the episode leaves the advantages
    # instead of scoring 0 at max_turns; counted, it is the agent's max_turns 0, flagged.
    counted, excluded = (
        play(FaultySimulator(ScriptedSimulator(), kinds=["no_stop"], rate=1.0), mode) for mode in ("count", "exclude")
    )
    assert counted.infos.termination == "max_turns" and [f["kind"] for f in counted.infos.user_flags] == ["no_stop"]
    assert excluded.infos.termination == "user_sim_mistake" and "no_stop" in excluded.infos.error
    cells = {"messages": [excluded.messages], "task": [TASK], "domain": ["retail"]}
    assert TaskCompletion()([""], **cells, rollout_infos=[excluded.infos]) == [None]


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
        results = run_episodes(RETAIL, tasks, GoldAgent, simulator, RolloutLimits(user_review="count"), workers=4)
        made.append({t["id"]: r.infos.user_sim_fault for t, r in zip(tasks, results, strict=True)})
    mistakes = sum(kind is not None for kind in made[0].values())
    assert made[0] == made[1] and 0 < mistakes < 12  # about half of the 12 episodes, never none or all here


def test_the_rollouts_of_one_task_run_at_once_each_get_their_own_mistake() -> None:
    # A GRPO group: 16 rollouts of one task at once on 8 workers. Rate 0.5: each draws its own plan (its task's
    # nth opening), and each label is the mistake made in that episode, not in another rollout of its task.
    simulator = FaultySimulator(ScriptedSimulator(), kinds=["role_break"], rate=0.5, seed=1)
    results = run_episodes(RETAIL, [TASK] * 16, GoldAgent, simulator, RolloutLimits(user_review="count"), workers=8)
    labelled = [r for r in results if r.infos.user_sim_fault == "role_break"]
    assert 0 < len(labelled) < 16
    # a label is where the mistake is: every labelled episode is flagged for it, and no other episode is
    assert all(any(f["kind"] == "role_break" for f in r.infos.user_flags) for r in labelled)
    assert not any(r.infos.user_flags for r in results if r.infos.user_sim_fault is None)


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
