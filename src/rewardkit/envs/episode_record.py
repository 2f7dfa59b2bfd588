"""The episode record: what one episode of the conversation loop leaves for everything that reads it.

The loop writes one per episode (:meth:`rewardkit.loop.episode.Episode.infos`); ms-swift carries its JSON form as
the sample's ``rollout_infos`` and hands it back to every reward; the exclusion plugin, the rollout metrics, the
evaluation scorer and the viewer read it. This class is the one contract between them: each field is named once,
here, and read as an attribute.

>>> record = EpisodeRecord(termination="user_sim_error", turns=2, audit=(), agent_said=("Which order?",))
>>> record.excluded, record.to_json()["agent_said"]
(True, ['Which order?'])
>>> EpisodeRecord.read({"termination": "user_stop", "turns": "3"}).turns  # a cell the loop did not write: lenient
0
>>> EpisodeRecord.read(None) is None  # an offline row: no live episode
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardkit.envs.outcomes import Goal
from rewardkit.envs.termination import EXCLUDED, NATURAL, Termination
from rewardkit.envs.tool_calls import user_facing_texts


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _rows(value: Any) -> tuple[Mapping[str, Any], ...] | None:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return None
    return tuple(row for row in value if isinstance(row, Mapping))


def _texts(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return None
    return tuple(text for text in value if isinstance(text, str))


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode: how it ended, its counts, the environment's final state and record, what the agent said.

    ``None`` marks what the episode could not record: no ending (an offline row), no state hash (the state could not
    be read), no audit or no ``agent_said`` (a record from elsewhere: readers then replay the messages).
    """

    termination: str | None = None  # a Termination value
    turns: int = 0  # the agent's turns
    tool_calls: int = 0
    tool_errors: int = 0
    policy_tokens: int = 0  # the tokens the policy generated, over all its turns
    state_hash: str | None = None  # the database's hash at the end
    audit: tuple[Mapping[str, Any], ...] | None = None  # every tool call with its result code (the environment's)
    agent_said: tuple[str, ...] | None = None  # the agent's user-facing texts, message by message
    transcript: str = ""  # the conversation as the simulated user saw it
    user_sim: str = ""  # the simulator's name
    error: str | None = None  # why an infrastructure ending happened
    user_flags: tuple[Mapping[str, Any], ...] = ()  # the user review's flags: {"kind", "turn", "evidence"} each
    user_sim_fault: str | None = None  # the mistake a simulator made on purpose (user_sim.fault_rate): its label
    goal: Goal | None = None  # what completes the task, as the episode's scheduler judged it: the reward's to read

    @classmethod
    def unstarted(cls, error: str, user_sim: str, ending: Termination = Termination.ENV_ERROR) -> EpisodeRecord:
        """An episode whose environment could not be opened (its server unreachable, its simulated memory not
        written): it never started."""
        return cls(termination=ending.value, audit=(), agent_said=(), user_sim=user_sim, error=error)

    @property
    def excluded(self) -> bool:
        """It ended on infrastructure (the simulator, the agent's endpoint, the tools): left out of training."""
        return self.termination in EXCLUDED  # str-valued members: the stored value matches

    @property
    def natural(self) -> bool:
        """It ended by the conversation's own means (a stop, a transfer): the only endings that earn credit."""
        return self.termination in NATURAL

    def to_json(self) -> dict[str, Any]:
        """The JSON object ms-swift carries as ``rollout_infos``."""
        out = dataclasses.asdict(dataclasses.replace(self, goal=None))  # the goal is written by its own to_json
        out["audit"] = None if self.audit is None else [dict(row) for row in self.audit]
        out["agent_said"] = None if self.agent_said is None else list(self.agent_said)
        out["user_flags"] = [dict(flag) for flag in self.user_flags]
        out["goal"] = None if self.goal is None else self.goal.to_json()
        return out

    @classmethod
    def read(cls, value: Any) -> EpisodeRecord | None:
        """A ``rollout_infos`` cell as the record: None for a row without one (offline data), the record itself, or
        its JSON form. A cell the loop did not write is read field by field: a field that holds the wrong type is
        taken as not recorded, so a hand-made row is scored as offline data would be rather than failing training."""
        if value is None or isinstance(value, EpisodeRecord):
            return value
        if not isinstance(value, Mapping):
            return None
        return cls(
            termination=_text(value.get("termination")),
            turns=_count(value.get("turns")),
            tool_calls=_count(value.get("tool_calls")),
            tool_errors=_count(value.get("tool_errors")),
            policy_tokens=_count(value.get("policy_tokens")),
            state_hash=_text(value.get("state_hash")),
            audit=_rows(value.get("audit")),
            agent_said=_texts(value.get("agent_said")),
            transcript=_text(value.get("transcript")) or "",
            user_sim=_text(value.get("user_sim")) or "",
            error=_text(value.get("error")),
            user_flags=_rows(value.get("user_flags")) or (),
            user_sim_fault=_text(value.get("user_sim_fault")),
            goal=Goal.read(value.get("goal")),
        )


def why_scored(
    ending: str | None, reward: float | None, checks: Sequence[tuple[str, bool]] | None, left_out: bool = False
) -> str:
    """One line: why an episode scored ``reward`` (the task-completion score) by the reward's ``checks`` (name,
    passed): its first check not met, or its ending. ``left_out``: it failed on the infrastructure, whatever its
    ``ending`` (an excluded ending is left out anyway). The episode viewer and the live diagnostics' trackers both
    say it.

    >>> why_scored("user_stop", 0.0, [("said 'refund'", False), ("the final database equals the gold state", True)])
    "not complete: said 'refund': not met"
    >>> why_scored("max_turns", 0.0, [("the final database equals the gold state", True)])
    'no credit: it ended as max_turns; only a stop or a transfer earns credit'
    """
    if left_out or ending in EXCLUDED:
        return f"left out of training: it ended as {ending}, the infrastructure's doing, not the agent's"
    if reward == 1.0:
        return "complete: every check passed"
    if ending not in NATURAL:
        return f"no credit: it ended as {ending}; only a stop or a transfer earns credit"
    missed = [name for name, ok in checks or () if not ok]
    if missed:
        more = f" (and {len(missed) - 1} more)" if len(missed) > 1 else ""
        return f"not complete: {missed[0]}: not met{more}"
    return f"scored {reward}"


def said_texts(messages: Sequence[Mapping[str, Any]], record: EpisodeRecord | None = None) -> list[str]:
    """What the agent said to the user, message by message. A live rollout's ``agent_said`` is used when recorded
    (on ms-swift >= 4.6 ``messages`` may hold assistant turns as token ids)."""
    if record is not None and record.agent_said is not None:
        return list(record.agent_said)
    return [t for t in user_facing_texts(messages) if isinstance(t, str)]
