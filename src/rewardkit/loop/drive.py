"""Run whole episodes outside ms-swift: an agent callable talks to a simulated user on a real database.

The same :class:`Episode` steps as the GRPO scheduler, driven synchronously; used by
the gold-agent check, the benchmarks, and trajectory synthesis and evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from rewardkit.envs import Domain
from rewardkit.envs.termination import Termination
from rewardkit.loop.agents import Agent, AgentError, AgentReply, as_reply
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.episode import Episode
from rewardkit.loop.user_sim.base import UserSimulator
from rewardkit.rewards.episodes import gold_outcome


@dataclass(frozen=True)
class EpisodeResult:
    task_id: str
    messages: list[dict[str, Any]]  # the conversation as the policy saw it, its own turns included
    infos: dict[str, Any]  # what the scheduler puts in rollout_infos


def run_episode(
    domain: Domain,
    task: Mapping[str, Any],
    agent: Agent,
    simulator: UserSimulator,
    limits: RolloutLimits,
    system: str | None = None,
) -> EpisodeResult:
    """One conversation; ``system`` replaces the domain's policy as the agent's system prompt.

    Infrastructure failures end the episode, named, instead of raising: the simulator's (``user_sim_error``),
    the agent endpoint's (``agent_error``) and the tools' server's (``env_error``: a ``ConnectionError``, such
    as an MCP server that went away).
    """
    try:
        gold = gold_outcome(domain.name, task).state_hash
        episode = Episode(domain, task, simulator, limits, gold_state=gold)
    except ConnectionError as exc:  # the environment could not even be opened
        return EpisodeResult(str(task.get("id")), [], Episode.unstarted(str(exc), simulator.name))
    try:
        messages: list[dict[str, Any]] = [{"role": "system", "content": domain.policy() if system is None else system}]
        opening = episode.open()
        if opening is not None:
            messages.append({"role": "user", "content": opening})
        while not episode.done:
            try:
                reply = as_reply(agent(messages))
            except AgentError as exc:  # infrastructure: the episode is excluded, not failed
                episode.end(Termination.AGENT_ERROR, str(exc))
                break
            message = _assistant(reply)
            messages.append(message)
            try:
                answer = episode.agent_turn(reply.text, reply.finish_reason, reply.n_tokens, reply.tool_calls)
            except ConnectionError as exc:
                episode.end(Termination.ENV_ERROR, str(exc))
                break
            if answer:
                episode.user_turn()
            messages += _answer_ids(message, episode.take_pending())
        return EpisodeResult(str(task.get("id")), messages, episode.infos())
    finally:
        episode.close()


def _assistant(reply: AgentReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls and "<tool_call>" not in reply.text:  # the calls the episode runs (it reads one source)
        message["tool_calls"] = [{**c, "id": c.get("id") or f"call_{i}"} for i, c in enumerate(reply.tool_calls)]
    return message


def _answer_ids(message: Mapping[str, Any], pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results answer the message's structured calls in order (OpenAI servers require the ids)."""
    ids = iter(c["id"] for c in message.get("tool_calls") or ())
    return [{**m, "tool_call_id": next(ids, None)} if m["role"] == "tool" and "tool_calls" in message else m
            for m in pending]  # fmt: skip


def run_episodes(
    domain: Domain,
    tasks: Sequence[Mapping[str, Any]],
    make_agent: Callable[[Mapping[str, Any]], Agent],
    simulator: UserSimulator,
    limits: RolloutLimits,
    workers: int = 8,
    system: str | None = None,
    on_result: Callable[[int, EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """One episode per item of ``tasks`` (a task listed twice runs twice), ``workers`` at a time.

    Simulator and agent calls wait on the network, not the CPU, hence threads. ``on_result(i, result)`` runs
    in the caller's thread as each episode ends (``i`` indexes ``tasks``); the results come back in task order.
    """

    def one(task: Mapping[str, Any]) -> EpisodeResult:
        return run_episode(domain, task, make_agent(task), simulator, limits, system)

    results: list[EpisodeResult | None] = [None] * len(tasks)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(one, task): i for i, task in enumerate(tasks)}
        for future in as_completed(futures):
            i = futures[future]
            results[i] = future.result()
            if on_result is not None:
                on_result(i, results[i])
    return results  # type: ignore[return-value]  # every slot is filled
