"""Episodes turn by turn in cohorts, for an agent that generates for many conversations at once.

A local checkpoint generates a batch almost as fast as one conversation, so evaluation should not call it
once per episode. :func:`run_lockstep` takes the episodes in cohorts of ``batch`` (in the order given) and
runs each cohort as ms-swift's multi-turn driver runs a GRPO batch: one generation for every conversation
still going, then every conversation's step at once, in threads (tool calls, and the user simulator, whose
replies wait on the network), until the cohort has ended.

Nothing here depends on timing: a cohort is a fixed slice of the episodes and a round holds exactly its
conversations still going. With a seed per (task, trial) (:func:`episode_seed`) and per turn
(:func:`turn_seed`), two models with the same weights play the same episodes token for token.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from rewardkit.envs import Domain
from rewardkit.loop.agents import AgentError, AgentReply
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import Conversation, EpisodeResult
from rewardkit.loop.user_sim.base import UserSimulator


class BatchAgent(Protocol):
    def replies(
        self, conversations: Sequence[Sequence[Mapping[str, Any]]], seeds: Sequence[int | None]
    ) -> list[AgentReply]: ...


def _mix(*parts: object) -> int:
    """A 63-bit seed from the parts, the same in every process (Python's own hash of a string is salted)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big") >> 1


def episode_seed(task_id: str, trial: int, base: int = 0) -> int:
    """The seed of trial ``trial`` of task ``task_id``: the same for every model, so they share a random stream."""
    return _mix("episode", base, str(task_id), int(trial))


def turn_seed(seed: int, turn: int) -> int:
    """The seed of the agent's turn ``turn`` (0 for its first) in the episode seeded ``seed``."""
    return _mix("turn", seed, int(turn))


def run_lockstep(
    domain: Domain,
    tasks: Sequence[Mapping[str, Any]],
    agent: BatchAgent,
    simulator: UserSimulator,
    limits: RolloutLimits,
    seeds: Sequence[int],
    batch: int = 8,
    system: str | None = None,
    on_result: Callable[[int, EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """One episode per item of ``tasks`` (``seeds[i]`` seeds episode i), ``batch`` conversations per
    generation. ``on_result(i, result)`` runs as each episode ends, in index order within a round; the results
    come back in task order. An interrupt drops the cohort's unfinished episodes (a resumed run reruns them)."""
    if len(seeds) != len(tasks):
        raise ValueError(f"run_lockstep: {len(seeds)} seeds for {len(tasks)} tasks; one per task")
    results: list[EpisodeResult | None] = [None] * len(tasks)
    pool = ThreadPoolExecutor(max_workers=max(1, batch), thread_name_prefix="rewardkit-lockstep")
    try:
        for first in range(0, len(tasks), max(1, batch)):
            cohort = range(first, min(first + max(1, batch), len(tasks)))

            def start(i: int) -> Conversation:
                return Conversation.start(domain, tasks[i], simulator, limits, system)

            conversations = dict(zip(cohort, pool.map(start, cohort), strict=True))
            try:
                _play(conversations, agent, seeds, pool, results, on_result)
            finally:
                for conversation in conversations.values():
                    conversation.close()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # a simulator call in flight cannot hold the stop
        raise
    pool.shutdown()
    return results  # type: ignore[return-value]  # every slot is filled


def _play(
    conversations: dict[int, Conversation],
    agent: BatchAgent,
    seeds: Sequence[int],
    pool: ThreadPoolExecutor,
    results: list[EpisodeResult | None],
    on_result: Callable[[int, EpisodeResult], None] | None,
) -> None:
    """Rounds of one cohort: a generation for its live conversations, then their steps, until all have ended."""
    while True:
        for i, conversation in conversations.items():
            if conversation.done and results[i] is None:
                results[i] = conversation.result()
                if on_result is not None:
                    on_result(i, results[i])  # type: ignore[arg-type]
        live = [i for i, conversation in conversations.items() if not conversation.done]
        if not live:
            return
        try:
            outs: Sequence[AgentReply | AgentError] = agent.replies(
                [conversations[i].messages for i in live],
                [turn_seed(seeds[i], conversations[i].turns()) for i in live],
            )
        except AgentError as exc:  # the generation failed for the whole round: each of its episodes is excluded
            outs = [exc] * len(live)
        list(pool.map(lambda i, out: conversations[i].step(out), live, outs))
