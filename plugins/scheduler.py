"""``simulated_user``: multi-turn GRPO rollouts where a simulated user talks to the policy and tools hit a database.

MUA-RL's loop on ms-swift, on any domain. Per rollout (``uuid``): a private database copy of the row's domain
(``get_domain`` of its ``domain`` cell, or the domain that ``$REWARDKIT_CONFIG``'s ``domain`` key names) and the
row's task; the domain's user simulator writes the first user turn; after each assistant turn the
tool calls run through the harness (results come back as ``tool`` messages) or, with no
tool call, the simulator answers. The episode ends on a user stop token, the domain's
transfer tool, ``###STOP###`` from the agent, ``max_turns``, the token or error budget,
``finish_reason == "length"``, or a simulator failure. ``rollout_infos`` carries the
state hash, audit, termination, counts and transcript for the rewards.

Works in colocate mode (vLLM or the transformers engine) and with a ``swift rollout``
server, the scheduler staying on the ``swift rlhf`` side (one plugin for both). With ``rollout.env_servers`` the
episodes run on ``rewardkit env serve --openenv`` servers instead, spread over them in turn
(:mod:`rewardkit.loop.remote_env`); nothing else in the recipe changes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from swift.rollout.multi_turn import MultiTurnScheduler
from swift.utils import get_logger

from rewardkit.config.origin import sources_line
from rewardkit.envs import Domain, get_domain
from rewardkit.envs.registry import CONFIG_KEY, load_configured
from rewardkit.envs.task_verdict import checked_task, task_goal
from rewardkit.envs.tasks import TaskError
from rewardkit.envs.termination import Termination
from rewardkit.loop.config import RolloutLimits, load_run_config
from rewardkit.loop.episode import Episode
from rewardkit.loop.remote_env import RemoteEpisode, pick_server, require_client
from rewardkit.loop.user_review import make_reviewer
from rewardkit.loop.user_sim import UserSimulator, make_simulator
from rewardkit.plugins.tokens import (
    NATIVE_TOKEN_IDS,
    ExactTurns,
    end_of_turn_ids,
    response_prefix_ids,
    turn_before_a_tool,
)

logger = get_logger()


class SimulatorUnavailable(RuntimeError):
    """Too many episodes of one batch lost their user simulator: stop training rather than learn from noise."""


class FailedShare:
    """A batch's episodes lost to the simulator side (the user simulator, its reviewer, or the environment server),
    against ``rollout.max_failed_share``: past that share the run stops with :class:`SimulatorUnavailable`."""

    def __init__(self, share: float) -> None:
        self.share, self.size, self.failed = share, 0, 0

    def start(self, size: int) -> None:
        self.size, self.failed = size, 0

    def add(self, endpoint: str, error: str | None) -> None:
        self.failed += 1
        if self.failed > self.share * max(self.size, 1):
            raise SimulatorUnavailable(
                f"{self.failed} of {self.size} episodes in this batch lost {endpoint} (the user simulator, its "
                f"reviewer or the environment server; rollout.max_failed_share = {self.share}); last error: {error}. "
                "Check that the endpoint is up and reachable, or raise its timeout_s/retries."
            )


def _lost(ep: Episode | RemoteEpisode) -> bool:
    """The episode was lost to the simulator side: its simulator or reviewer failed, or its remote server did (the
    failures ``rollout.max_failed_share`` counts)."""
    if ep.termination is Termination.USER_SIM_ERROR:
        return True
    return isinstance(ep, RemoteEpisode) and ep.termination is Termination.ENV_ERROR


class SimulatedUserScheduler(MultiTurnScheduler):
    """ms-swift ``MultiTurnScheduler`` for rows of ``build tau2-grpo --multi-turn`` (``messages``, ``task``,
    ``domain``). ``simulator`` (tests, benchmarks) plays the user of every domain; else each domain gets the
    ``user_sim`` section's simulator for its users."""

    def __init__(
        self,
        infer_engine: Any = None,
        max_turns: int | None = None,
        *args: Any,
        simulator: UserSimulator | None = None,
        limits: RolloutLimits | None = None,
        concurrency: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(infer_engine, max_turns, *args, **kwargs)
        # ms-swift stops the loop at --max_turns itself, when set: the flag wins, and that ending is labelled the same
        cfg = load_run_config(flags={"rollout.max_turns": ("--max_turns", max_turns)} if max_turns else None)
        logger.info(f"simulated_user config: {sources_line(cfg, 'user_sim', 'rollout')}")
        limits = limits or cfg.rollout
        # Training: a flagged episode is left out of the advantages unless the config says otherwise.
        self.limits = dataclasses.replace(
            limits, max_turns=max_turns or limits.max_turns, user_review=limits.user_review or "exclude"
        )
        self.max_turns = self.limits.max_turns
        sim_config = cfg.user_sim
        self.sim_config, self.given = sim_config, simulator
        self.simulators: dict[str, UserSimulator] = {}  # domain name -> the simulator of its users
        self.reviewer = make_reviewer(sim_config)  # the model reviewer of the user after the rules, if configured
        servers = self.limits.env_servers
        if servers:
            require_client()
        if cfg.domain is not None:  # the recipe's domain: one that does not load fails here, not later
            self._simulator(load_configured(cfg.domain, cfg.origin(CONFIG_KEY)))
        # Simulator calls run in this pool, not asyncio's default one (min(32, cpus + 4) threads): a batch's
        # replies then really run `concurrency` at a time. A thread pool outlives ms-swift's per-hook event loops.
        workers = concurrency or sim_config.concurrency
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="user-sim")
        self.episodes: dict[str, Episode | RemoteEpisode] = {}
        self.exact: dict[str, ExactTurns] = {}
        self.lost = FailedShare(self.limits.max_failed_share)
        self._prefix: list[int] | None = None
        self.end_ids = end_of_turn_ids(self.tokenizer) if self.tokenizer is not None else frozenset()

    # --- hooks -----------------------------------------------------------------------

    async def on_trajectory_start(self, requests: list[Any]) -> None:
        episodes = [self._start(req) for req in requests]
        self.lost.start(len(requests))
        # One simulator call per rollout, all at once: the batch waits for the slowest, not the sum. The requests
        # go out first; the episodes' database copies are made here while the replies are on their way.
        loop = asyncio.get_running_loop()
        asked = [loop.run_in_executor(self.pool, ep.open) for ep in episodes]
        for ep in episodes:
            ep.prepare()
        openings = await asyncio.gather(*asked)
        for req, ep, opening in zip(requests, episodes, openings, strict=True):
            if opening is None:  # the episode already ended: keep the row's user turn as the first prompt
                if _lost(ep):
                    self._failed(ep)
                continue
            user = next((m for m in reversed(req.messages) if m.get("role") == "user"), None)
            if user is None:
                req.messages.append({"role": "user", "content": opening})
            else:
                user["content"] = opening

    async def on_turn_end(self, infer_request: Any, response_choice: Any, current_turn: int) -> dict[str, Any]:
        uuid = infer_request.uuid
        ep = self.episodes.get(uuid)
        if ep is None:
            raise RuntimeError(
                f"simulated_user: no episode for rollout {uuid}; on_trajectory_start was not called for it"
            )
        message = response_choice.message
        ids = list(response_choice.token_ids or [])
        native = getattr(message, "tool_calls", None)
        # In the pool, as the user's turn is: an episode that ends here is reviewed, and a model reviewer blocks.
        loop = asyncio.get_running_loop()
        finish, ended = response_choice.finish_reason, ep.done
        if await loop.run_in_executor(self.pool, ep.agent_turn, message.content, finish, len(ids), native):
            await loop.run_in_executor(self.pool, ep.user_turn)
        if not ep.done and current_turn >= self.max_turns:
            await loop.run_in_executor(self.pool, ep.end, Termination.MAX_TURNS)
        if not ended and _lost(ep):
            self._failed(ep)
        if not ep.done:
            return {"done": False}
        infos = ep.infos().to_json()
        ep.close()
        del self.episodes[uuid]
        exact = self.exact.pop(uuid, None)
        if exact is not None:  # ms-swift 4.4: text back in (the last turn's ids go to training as sampled)
            exact.restore()
        return {"done": True, "rollout_infos": infos}

    def step(self, infer_request: Any, response_choice: Any, current_turn: int) -> dict[str, Any]:
        ep = self.episodes[infer_request.uuid]
        out: dict[str, Any] = {"infer_request": infer_request}
        pending = ep.take_pending()
        sampled = response_choice.token_ids or []
        if not NATIVE_TOKEN_IDS:
            exact = self.exact.setdefault(infer_request.uuid, ExactTurns(self._prefix_ids(), self.end_ids))
            ids, mask = exact.freeze(infer_request.messages, sampled)
            out.update(response_token_ids=ids, response_loss_mask=mask)
        elif pending and pending[0]["role"] == "tool":  # 4.6 keeps the sampled ids: see turn_before_a_tool
            out.update(turn_before_a_tool(response_choice, self.end_ids))
        infer_request.messages.extend(pending)
        return out

    # --- internals -------------------------------------------------------------------

    def _start(self, req: Any) -> Episode | RemoteEpisode:
        row = req.data_dict or {}
        missing = [c for c in ("task", "domain") if c not in row]
        if missing:
            raise TaskError(
                f"simulated_user needs dataset columns {missing}; build rows with "
                "`rewardkit build tau2-grpo --multi-turn`"
            )
        domain = get_domain(row["domain"])
        # Gold actions must name the domain's tools and fit their schemas, the gold writes must succeed, and a gold
        # that changes nothing must name what an episode shows instead (the goal then judges it, as the reward does).
        task = checked_task(row["task"], "column 'task'", domain.name)
        episode: Episode | RemoteEpisode
        if self.limits.env_servers:  # the episode runs on a server, the next in turn
            limits = self.limits  # its max_turns is ms-swift's; its review mode the trainer's (exclude unless told)
            episode = RemoteEpisode(pick_server(limits.env_servers), task, limits, str(limits.user_review))
        else:
            goal = task_goal(domain.name, task)
            episode = Episode(domain, task, self._simulator(domain), self.limits, goal=goal, reviewer=self.reviewer)
        old = self.episodes.pop(req.uuid, None)
        if old is not None:  # a rollout restarted under the same id: drop the stale copy
            old.close()
        self.episodes[req.uuid] = episode
        return episode

    def _failed(self, ep: Episode | RemoteEpisode) -> None:
        self.lost.add(ep.simulator.name, ep.error)

    def _simulator(self, domain: Domain) -> UserSimulator:
        """The simulator of ``domain``'s users, built on its first episode (an LLM user plays by its guidelines)."""
        if self.given is not None:
            return self.given
        if domain.name not in self.simulators:
            self.simulators[domain.name] = make_simulator(self.sim_config, domain)
        return self.simulators[domain.name]

    def _prefix_ids(self) -> list[int]:
        if self._prefix is None:
            self._prefix = response_prefix_ids(self.tokenizer) if self.tokenizer is not None else []
        return self._prefix
