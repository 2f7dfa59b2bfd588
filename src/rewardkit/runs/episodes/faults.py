"""Whose fault each rejected synthesis episode is: the agent's, the simulated user's, the tools', or nobody's.

One declared mapping, :data:`FAULTS`, from every reason :func:`rewardkit.runs.episodes.synthesis.select` can reject an
episode for to the party at fault; a key ``reason/ending`` (a failed task that the user ended out of scope)
wins over the reason alone. A judge's rejection is the fault the judge named (the agent's when it named none).
``none`` is a rejection that blames nobody: a duplicate, a person's or a judge's missing verdict, a person's no.
"""

from __future__ import annotations

from collections.abc import Mapping

PARTIES = ("agent", "user", "tool", "none")

FAULTS: Mapping[str, str] = {
    # infrastructure endings (rewardkit.envs.termination.EXCLUDED): the endpoint or server that failed
    "user_sim_error": "user",
    "user_sim_mistake": "user",
    "agent_error": "agent",
    "env_error": "tool",
    "tool_sim_error": "tool",
    # the rules
    "user_flagged": "user",  # the user review flagged the simulated user's part
    "task_failed": "agent",
    "task_failed/user_out_of_scope": "user",  # the simulated user left the scenario: the simulation's gap
    "malformed_tool_call": "agent",
    "empty_assistant_turn": "agent",
    "no_agent_turn": "user",  # the simulated user stopped before the agent said anything
    # the judge (its own fault label wins) and the person
    "judge_rejected": "agent",
    "judge_error": "none",
    "duplicate": "none",
    "reviewer_rejected": "none",
    "unreviewed": "none",
}


def fault_of(reason: str, ending: str, judged: str | None = None) -> str:
    """The party at fault for a rejection for ``reason`` of an episode that ended ``ending``; ``judged``: the fault
    a judge named (judge_rejected only)."""
    if reason == "judge_rejected" and judged is not None:
        return judged
    found = FAULTS.get(f"{reason}/{ending}", FAULTS.get(reason))
    if found is None:
        raise ValueError(
            f"no fault label for the rejection reason {reason!r}; add it to rewardkit.runs.episodes.faults.FAULTS"
        )
    return found


def tally(counts: Mapping[str, int]) -> dict[str, int]:
    """Every party's count, in the order of :data:`PARTIES` (zeros included)."""
    return {party: int(counts.get(party, 0)) for party in PARTIES}
