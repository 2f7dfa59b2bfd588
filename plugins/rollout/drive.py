"""Run whole episodes outside ms-swift: an agent callable talks to a simulated user on a real database.

The same :class:`Episode` steps as the GRPO scheduler, driven synchronously; used by
the gold-agent check, the benchmarks, and trajectory synthesis and evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rewardkit.plugins.envs import Domain
from rewardkit.plugins.rollout.config import RolloutLimits
from rewardkit.plugins.rollout.episode import Episode
from rewardkit.plugins.user_sim.base import UserSimulator
from rewardkit.rewards.episodes import gold_outcome

# messages so far (system, user, assistant, tool...) -> the agent's next message
Agent = Callable[[Sequence[Mapping[str, Any]]], str]


@dataclass(frozen=True)
class EpisodeResult:
    task_id: str
    messages: list[dict[str, Any]]  # the conversation as the policy saw it, its own turns included
    infos: dict[str, Any]  # what the scheduler puts in rollout_infos


def run_episode(
    domain: Domain, task: Mapping[str, Any], agent: Agent, simulator: UserSimulator, limits: RolloutLimits
) -> EpisodeResult:
    episode = Episode(domain, task, simulator, limits, gold_state=gold_outcome(domain.name, task).state_hash)
    try:
        messages: list[dict[str, Any]] = [{"role": "system", "content": domain.policy()}]
        opening = episode.open()
        if opening is not None:
            messages.append({"role": "user", "content": opening})
        while not episode.done:
            text = agent(messages)
            messages.append({"role": "assistant", "content": text})
            if episode.agent_turn(text):
                episode.user_turn()
            messages += episode.take_pending()
        return EpisodeResult(str(task.get("id")), messages, episode.infos())
    finally:
        episode.close()


def run_episodes(
    domain: Domain,
    tasks: Sequence[Mapping[str, Any]],
    make_agent: Callable[[Mapping[str, Any]], Agent],
    simulator: UserSimulator,
    limits: RolloutLimits,
    workers: int = 8,
) -> list[EpisodeResult]:
    """One episode per task, ``workers`` at a time (simulator calls wait on the network, not the CPU)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_episode, domain, t, make_agent(t), simulator, limits) for t in tasks]
        return [f.result() for f in futures]
