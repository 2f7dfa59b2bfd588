"""Run whole episodes outside ms-swift: an agent callable talks to a simulated user on a real database.

The same :class:`Episode` steps as the GRPO scheduler, driven synchronously; used by
the gold-agent check, the benchmarks, and trajectory synthesis and evaluation.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardkit.envs import Domain
from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.state_diff import Changes
from rewardkit.envs.task_verdict import task_goal
from rewardkit.envs.termination import Termination
from rewardkit.loop.agents import Agent, AgentError, AgentReply, as_reply
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.episode import ENV_FAILURES, Episode, env_ending
from rewardkit.loop.remote_env import RemoteEpisode, pick_server
from rewardkit.loop.user_review import ModelReviewer
from rewardkit.loop.user_sim.base import UserSimulator


@dataclass(frozen=True)
class EpisodeResult:
    task_id: str
    messages: list[dict[str, Any]]  # the conversation as the policy saw it, its own turns included
    infos: EpisodeRecord  # its JSON form is what the scheduler puts in rollout_infos
    changes: Changes | None = None  # what its writes changed, where the environment tracks them (the log's diff)
    closing: str | None = None  # the user's line that ended it, which the policy never saw (Turns.closing)


GRACE_S = 1.0  # how long a stopped run waits for the episodes in flight to finish
_POLL_S = 0.1  # the caller's thread wakes this often, so a signal is handled at once


class _Abandoned(Exception):
    """Raised inside an in-flight episode of a stopped run, at its next agent turn."""


class Conversation:
    """One episode as the agent sees it: its messages (system first) and the step that answers an agent reply.

    Both drivers step it: :func:`run_episode` one agent call at a time, :mod:`rewardkit.loop.lockstep` a batch
    of conversations per generation. Built by :meth:`start`, which never raises on infrastructure: an environment
    that cannot be opened gives an ended conversation whose ``result`` says why.
    """

    def __init__(
        self,
        task: Mapping[str, Any],
        episode: Episode | RemoteEpisode | None,
        messages: list[dict[str, Any]],
        unstarted: EpisodeRecord | None = None,
    ) -> None:
        self.task_id, self.episode, self.messages, self._unstarted = str(task.get("id")), episode, messages, unstarted

    @classmethod
    def start(
        cls,
        domain: Domain,
        task: Mapping[str, Any],
        simulator: UserSimulator,
        limits: RolloutLimits,
        system: str | None = None,
        reviewer: ModelReviewer | None = None,
    ) -> Conversation:
        """The episode opened: its environment, the system prompt (``system``, else the domain's policy) and the
        user's opening. The simulator's opening is its first reply, so a failure there ends the episode.
        ``reviewer``: the model reviewer of the user, after the rules. With ``limits.env_servers`` the episode runs
        on one of those servers (:mod:`rewardkit.loop.remote_env`: their simulator and reviewer, not these)."""
        episode: Episode | RemoteEpisode
        try:
            if limits.env_servers:
                review = limits.user_review or "count"  # synthesis and evaluation count flags unless told
                episode = RemoteEpisode(pick_server(limits.env_servers), task, limits, review)
            else:
                goal = task_goal(domain.name, task)
                episode = Episode(domain, task, simulator, limits, goal=goal, reviewer=reviewer)
        except ENV_FAILURES as exc:  # the environment could not even be opened (nor the gold replayed on it)
            return cls(task, None, [], EpisodeRecord.unstarted(str(exc), simulator.name, env_ending(exc)))
        messages: list[dict[str, Any]] = [{"role": "system", "content": domain.policy() if system is None else system}]
        try:
            episode.prepare()  # the database copy, while the episodes started before this one wait on their openings
            opening = episode.open()
        except BaseException:
            episode.close()
            raise
        if opening is not None:
            messages.append({"role": "user", "content": opening})
        return cls(task, episode, messages)

    @property
    def done(self) -> bool:
        return self.episode is None or self.episode.done

    def turns(self) -> int:
        """The agent's turns so far."""
        return sum(m["role"] == "assistant" for m in self.messages)

    def step(self, out: str | AgentReply | AgentError) -> None:
        """Answer the agent's reply (or the error its endpoint raised): run its calls or let the user answer."""
        episode = self.episode
        assert episode is not None and not episode.done
        if isinstance(out, AgentError):  # infrastructure: the episode is excluded, not failed
            episode.end(Termination.AGENT_ERROR, str(out))
            return
        reply = as_reply(out)
        message = _assistant(reply)
        self.messages.append(message)
        # A lost tool server ends the episode as env_error inside the episode's own guard.
        if episode.agent_turn(reply.text, reply.finish_reason, reply.n_tokens, reply.tool_calls):
            episode.user_turn()
        self.messages += _answer_ids(message, episode.take_pending())

    def result(self) -> EpisodeResult:
        if self.episode is None:
            assert self._unstarted is not None  # a conversation without an episode is built with its record
            return EpisodeResult(self.task_id, [], self._unstarted)
        episode = self.episode
        return EpisodeResult(self.task_id, self.messages, episode.infos(), episode.changes(), episode.closing)

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()


def run_episode(
    domain: Domain,
    task: Mapping[str, Any],
    agent: Agent,
    simulator: UserSimulator,
    limits: RolloutLimits,
    system: str | None = None,
    stop: threading.Event | None = None,
) -> EpisodeResult:
    """One conversation; ``system`` replaces the domain's policy as the agent's system prompt. Once ``stop``
    is set the episode makes no further agent call: it raises ``_Abandoned`` (``run_episodes`` drops it).

    Infrastructure failures end the episode, named, instead of raising: the simulator's (``user_sim_error``),
    the agent endpoint's (``agent_error``), the tools' server's (``env_error``: a ``ConnectionError``, such
    as an MCP server that went away) and a simulated tool's (``tool_sim_error``).
    """
    conversation = Conversation.start(domain, task, simulator, limits, system)
    try:
        while not conversation.done:
            if stop is not None and stop.is_set():
                raise _Abandoned(conversation.task_id)
            try:
                out: str | AgentReply | AgentError = agent(conversation.messages)
            except AgentError as exc:
                out = exc
            conversation.step(out)
        return conversation.result()
    finally:
        conversation.close()


def _assistant(reply: AgentReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls and "<tool_call>" not in reply.text:  # the calls the episode runs (it reads one source)
        message["tool_calls"] = [{**c, "id": c.get("id") or f"call_{i}"} for i, c in enumerate(reply.tool_calls)]
    return message


def _answer_ids(message: Mapping[str, Any], pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results answer the message's structured calls in order (OpenAI servers require the ids)."""
    ids = iter(c["id"] for c in message.get("tool_calls") or ())
    return [
        {**m, "tool_call_id": next(ids, None)} if m["role"] == "tool" and "tool_calls" in message else m
        for m in pending
    ]


def run_episodes(
    domain: Domain,
    tasks: Sequence[Mapping[str, Any]],
    make_agent: Callable[[Mapping[str, Any]], Agent],
    simulator: UserSimulator,
    limits: RolloutLimits,
    workers: int = 8,
    system: str | None = None,
    on_result: Callable[[int, EpisodeResult], None] | None = None,
    grace_s: float = GRACE_S,
) -> list[EpisodeResult]:
    """One episode per item of ``tasks`` (a task listed twice runs twice), ``workers`` at a time.

    Simulator and agent calls wait on the network, not the CPU, hence threads. ``on_result(i, result)`` runs
    in the caller's thread as each episode ends (``i`` indexes ``tasks``); the results come back in task order.

    Stopping. When the caller's thread is interrupted (KeyboardInterrupt, or the CLI's SIGTERM raised as one),
    when ``on_result`` raises (a full disk), or when an episode raises (a bug: infrastructure failures end
    their episode instead of raising), no queued episode starts and every episode in flight makes no further
    agent call. Those that finish within ``grace_s`` seconds are still handed to ``on_result``; the others are
    abandoned (threads cannot be killed: each stops at its next agent turn, its result dropped, so a resumed
    run runs it again). Then the exception propagates: a run stops within about ``grace_s`` seconds, having
    handed over every episode that finished. The workers are daemon threads, not a ``ThreadPoolExecutor``'s,
    whose threads the interpreter joins at exit: an agent call in flight cannot hold the process.
    """
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(tasks)):
        todo.put(i)
    finished: queue.SimpleQueue[_Finished] = queue.SimpleQueue()
    stop = threading.Event()

    def episode(i: int) -> EpisodeResult:
        return run_episode(domain, tasks[i], make_agent(tasks[i]), simulator, limits, system, stop)

    threads = _start_workers(max(1, min(workers, len(tasks))), episode, todo, finished, stop)
    results: list[EpisodeResult | None] = [None] * len(tasks)
    try:
        for _ in range(len(tasks)):
            i, result, error = _next(finished)
            if error is not None:
                raise error
            results[i] = result
            if on_result is not None:
                on_result(i, result)  # type: ignore[arg-type]  # None only once stopped
    except BaseException:
        stop.set()
        _finish_in_flight(finished, threads, results, on_result, grace_s)
        raise
    for thread in threads:
        thread.join()
    return results  # type: ignore[return-value]  # every slot is filled


# A finished episode, as a worker hands it over: (index in tasks, result or None when abandoned, its exception).
_Finished = tuple[int, EpisodeResult | None, BaseException | None]


def _work(
    episode: Callable[[int], EpisodeResult],
    todo: queue.SimpleQueue[int],
    finished: queue.SimpleQueue[_Finished],
    stop: threading.Event,
) -> None:
    """One worker: run queued episodes until the queue is empty or the run stops, handing each over."""
    while not stop.is_set():
        try:
            i = todo.get_nowait()
        except queue.Empty:
            return
        try:
            result = episode(i)
        except _Abandoned:
            finished.put((i, None, None))
        except BaseException as exc:  # a bug in one episode stops the run, in the caller's thread
            stop.set()  # now: this worker and the others take nothing more from the queue
            finished.put((i, None, exc))
        else:
            finished.put((i, result, None))


def _start_workers(
    count: int,
    episode: Callable[[int], EpisodeResult],
    todo: queue.SimpleQueue[int],
    finished: queue.SimpleQueue[_Finished],
    stop: threading.Event,
) -> list[threading.Thread]:
    """``count`` daemon worker threads, started (an agent call in flight cannot hold the process at exit)."""
    threads = [
        threading.Thread(target=_work, args=(episode, todo, finished, stop), name=f"rewardkit-episode-{n}", daemon=True)
        for n in range(count)
    ]
    for thread in threads:
        thread.start()
    return threads


def _next(finished: queue.SimpleQueue[Any]) -> Any:
    """The next finished episode; a short poll keeps the caller's thread responsive to signals."""
    while True:
        try:
            return finished.get(timeout=_POLL_S)
        except queue.Empty:
            continue


def _finish_in_flight(
    finished: queue.SimpleQueue[Any],
    threads: Sequence[threading.Thread],
    results: list[EpisodeResult | None],
    on_result: Callable[[int, EpisodeResult], None] | None,
    grace_s: float,
) -> None:
    """After a stop: hand over the episodes that finish within ``grace_s``; abandon the rest."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            i, result, _ = finished.get(timeout=min(_POLL_S, max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            if not any(thread.is_alive() for thread in threads):
                return
            continue
        if result is None or results[i] is not None:
            continue
        results[i] = result
        if on_result is not None:
            try:
                on_result(i, result)
            except Exception:  # the exception that stopped the run is the one to report
                continue
