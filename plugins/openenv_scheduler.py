"""ms-swift plugin entry: ms-swift's own OpenEnv scheduler on a served rewardkit domain.

    rewardkit env serve --openenv --domain retail --port 8000
    swift rlhf --rlhf_type grpo ... --external_plugins rewards/__init__.py plugins/openenv_scheduler.py \\
        --multi_turn_scheduler rewardkit_openenv --max_turns 8 --reward_funcs task_completion

Registers ``rewardkit_openenv``, a subclass of ms-swift's ``OpenEnvScheduler`` (``openenv_scheduler``: OpenEnv's
``GenericEnvClient`` through ms-swift's ``OpenEnvWrapper``, one session per rollout, each row's ``env_config``
naming its server). It needs ms-swift >= 4.6 (sampled token ids kept natively) and the ``openenv`` package. What it
changes in ms-swift's scheduler, and why:

- **the task**: a row's ``reset_kwargs`` default to its ``task`` column's id and sha256 (the rows of ``rewardkit build
  tau2-grpo --multi-turn``), so the server plays the trainer's task and refuses another version of it; ``base_url``
  defaults to the first of ``rollout.env_servers`` in ``$REWARDKIT_CONFIG``;
- **the prompt**: the customer's opening replaces the row's user turn. A row with a system prompt keeps it and its
  ``tools``; a row without one takes the server's (the domain's policy and tool specs);
- **the turns**: the policy's message goes to the server with its finish reason and token count (a cut-off turn's
  calls are not run, the token budget is the server's); the tool results come back as ``tool`` messages and the
  customer's reply as a ``user`` message, so ms-swift's template keeps both out of the loss (ms-swift's default
  puts every observation in one ``user`` message as JSON); ``--max_turns`` travels with the turn that reaches it;
- **the reward**: the ended episode's record (the server's, checked as :func:`rewardkit.loop.remote_env.read_result`
  checks it) goes into ``rollout_infos``, so ``task_completion`` and the advantage exclusion read it as they read an
  in-process episode's (ms-swift's gym reward, ``total_reward``, is not used);
- **concurrency**: OpenEnv's sync client blocks, and ms-swift calls it on the event loop, so a batch's episodes
  would run one at a time; here they run in a thread pool of ``user_sim.concurrency`` threads;
- **the client**: the trainer's answer timeout (``rollout.env_timeout_s``), the server's token from
  ``$REWARDKIT_SERVE_TOKEN`` as a header, and no retry (ms-swift's wrapper retries on a new session, where a step
  meets no episode);
- **failures**: a server that cannot be reached, is full or refuses the task, or an answer off the schema, ends the
  episode as ``env_error`` with the reason (left out of training); past ``rollout.max_failed_share`` of a batch the
  run stops, naming the server and the last error, as with rewardkit's own client.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from swift.rollout.multi_turn import MultiTurnScheduler, OpenEnvScheduler, multi_turns
from swift.rollout.openenv_wrapper import OpenEnvWrapper
from swift.utils import get_logger

from rewardkit.envs.access import TOKEN_ENV
from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.task_verdict import checked_task
from rewardkit.envs.tasks import TaskError, task_digest
from rewardkit.envs.termination import Termination
from rewardkit.errors import UserError
from rewardkit.loop.config import RolloutLimits, load_run_config
from rewardkit.loop.remote_env import RemoteError, read_result
from rewardkit.plugins import exclusion
from rewardkit.plugins.scheduler import FailedShare
from rewardkit.plugins.tokens import end_of_turn_ids, turn_before_a_tool

KEY = "rewardkit_openenv"
logger = get_logger()
_LOST = frozenset({Termination.ENV_ERROR.value, Termination.USER_SIM_ERROR.value})


class Wrapper(OpenEnvWrapper):
    """ms-swift's wrapper with the trainer's answer timeout (``rollout.env_timeout_s``; OpenEnv's client waits 60 s)
    and the server's token (``$REWARDKIT_SERVE_TOKEN``, as a header), and no retried step: a step sent again on a
    new session would meet no episode there."""

    def __init__(self, env_config: dict[str, Any], limits: RolloutLimits) -> None:
        super().__init__(env_config)
        self.timeout_s = limits.env_timeout_s

    def _ensure_client(self) -> Any:
        if self._client is None:
            from openenv.core.generic_client import GenericEnvClient

            token = os.environ.get(TOKEN_ENV)
            client = GenericEnvClient(
                base_url=self.base_url,
                connect_timeout_s=self.timeout_s,
                message_timeout_s=self.timeout_s,
                headers={"Authorization": f"Bearer {token}"} if token else None,
            )
            self._client = client.sync()
            self._client.__enter__()
        return self._client

    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn`` once; anything it raises (OpenEnv's client raises what its transport and parser raise, for a
        server gone or an answer it cannot read) as a :class:`RemoteError` naming its type."""
        try:
            return fn()
        except Exception as exc:  # the client's and ms-swift's wrapper's, whatever the server sent
            raise RemoteError(f"{type(exc).__name__}: {exc}") from exc

    def reset(self) -> tuple[Any, Any]:
        return self.call(lambda: (self._ensure_client().reset(**self.reset_kwargs).observation, None))

    def step(self, action_dict: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
        result = self.call(lambda: self._ensure_client().step(action_dict))
        return result.observation, result.reward, result.done, None


class Session:
    """One rollout's episode on its server: its wrapper, the task it plays, and, once it ended, its record."""

    def __init__(self, wrapper: Wrapper, task_id: str, max_turns: int) -> None:
        self.wrapper, self.task_id, self.max_turns = wrapper, task_id, max_turns
        self.turns = 0
        self.record: EpisodeRecord | None = None

    def open(self) -> tuple[list[dict[str, str]], list[dict[str, Any]]] | None:
        """The server's messages (its system prompt and the customer's opening) and tools, after a reset of the
        session's task; None where the episode ended at its opening (its record is then kept). A reset answers no
        ``done`` through the client: an observation with a record is an ended episode's."""
        observation, _ = self.wrapper.reset()
        ended = isinstance(observation, Mapping) and observation.get("record") is not None
        answer = read_result("reset", observation, None, ended, self.task_id)
        if answer.record is not None:
            self.record = answer.record
            return None
        tools = observation.get("tools")
        return answer.messages, tools if isinstance(tools, list) else []

    def step(self, text: str, finish_reason: str | None, n_tokens: int) -> list[dict[str, str]]:
        """Send the policy's message; the messages that answer it (none once the episode ended: the customer's
        closing line is not the policy's to read)."""
        self.turns += 1
        action: dict[str, Any] = {"content": text, "finish_reason": finish_reason, "n_tokens": n_tokens}
        if self.turns >= self.max_turns:
            action["end"] = Termination.MAX_TURNS.value
        observation, reward, done, _ = self.wrapper.step(action)
        answer = read_result("step", observation, reward, done, self.task_id)
        self.record = answer.record
        return [] if done else answer.messages


def _text(value: Any, at: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{KEY}: {at} must be a non-empty string; got {value!r}")
    return value


class OpenEnvUserScheduler(OpenEnvScheduler):
    """ms-swift's ``OpenEnvScheduler`` on a ``rewardkit env serve --openenv`` server: see the module's docstring."""

    def __init__(
        self,
        infer_engine: Any = None,
        max_turns: int | None = None,
        *args: Any,
        concurrency: int | None = None,
        **kwargs: Any,
    ) -> None:
        if not hasattr(MultiTurnScheduler, "get_response_token_data"):
            raise UserError(
                f"--multi_turn_scheduler {KEY} needs ms-swift >= 4.6 (sampled token ids kept natively); on ms-swift "
                "4.4 use --multi_turn_scheduler simulated_user with rollout.env_servers"
            )
        super().__init__(infer_engine, max_turns, *args, **kwargs)
        cfg = load_run_config(flags={"rollout.max_turns": ("--max_turns", max_turns)} if max_turns else None)
        self.limits = cfg.rollout
        self.max_turns = max_turns or self.limits.max_turns
        workers = concurrency or cfg.user_sim.concurrency  # the benchmark's batch; else the config's
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openenv")
        self.sessions: dict[str, Session] = {}
        self.lost = FailedShare(self.limits.max_failed_share)
        self.end_ids = end_of_turn_ids(self.tokenizer) if self.tokenizer is not None else frozenset()

    def env_config(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The row's ``env_config`` over the defaults its ``task`` column and ``rollout.env_servers`` give."""
        given = row.get("env_config") or {}
        if not isinstance(given, Mapping):
            raise UserError(f"{KEY}: column 'env_config' must be an object, like {{\"base_url\": URL}}; got {given!r}")
        config = dict(given)
        if "base_url" not in config:
            if not self.limits.env_servers:
                raise UserError(
                    f"{KEY}: a row names no server: give it env_config.base_url, or set rollout.env_servers in "
                    "$REWARDKIT_CONFIG"
                )
            config["base_url"] = self.limits.env_servers[0]
        _text(config["base_url"], "env_config.base_url")
        if "reset_kwargs" not in config and "task" in row:
            if "domain" not in row:
                raise TaskError(f"{KEY}: a row with a 'task' column needs its 'domain' column too")
            task = checked_task(row["task"], "column 'task'", row["domain"])
            config["reset_kwargs"] = {"task_id": str(task.get("id")), "task_sha256": task_digest(task)}
        reset = config.get("reset_kwargs")
        if not isinstance(reset, Mapping) or reset.get("task_id") is None or not str(reset["task_id"]).strip():
            raise UserError(f"{KEY}: a row names no task: give it a 'task' column or env_config.reset_kwargs.task_id")
        return config

    # --- hooks -----------------------------------------------------------------------

    async def on_trajectory_start(self, requests: list[Any]) -> None:
        loop = asyncio.get_running_loop()
        self.lost.start(len(requests))
        opened = [await self._session(req) for req in requests]
        prompts = await asyncio.gather(*(loop.run_in_executor(self.pool, self._open, session) for session in opened))
        for session in opened:
            self._count_lost(session)
        for req, prompt in zip(requests, prompts, strict=True):
            if prompt is None:
                continue  # ended at its opening: the row's prompt stays, the first turn ends it
            messages, tools = prompt
            systems = [m for m in req.messages if m.get("role") == "system"]
            served = [m for m in messages if m["role"] == "user"][-1:]
            if systems:
                req.messages = [*systems, *served]
            else:
                req.messages, req.tools = [*[m for m in messages if m["role"] == "system"], *served], tools

    async def on_turn_end(self, infer_request: Any, response_choice: Any, current_turn: int) -> dict[str, Any]:
        uuid = infer_request.uuid
        session = self.sessions.get(uuid)
        if session is None:
            raise RuntimeError(f"{KEY}: no session for rollout {uuid}; on_trajectory_start was not called for it")
        if session.record is None:
            ids = response_choice.token_ids or []
            text, finish = response_choice.message.content, response_choice.finish_reason
            loop = asyncio.get_running_loop()
            self._pending_obs[uuid] = await loop.run_in_executor(self.pool, self._step, session, text, finish, len(ids))
            self._count_lost(session)
        if session.record is None:
            return {"done": False}
        await self._close(uuid)
        return {"done": True, "rollout_infos": session.record.to_json()}

    def step(self, infer_request: Any, response_choice: Any, current_turn: int) -> dict[str, Any]:
        out: dict[str, Any] = {"infer_request": infer_request}
        pending = self._pending_obs.pop(infer_request.uuid, None) or []
        if pending and pending[0]["role"] == "tool":
            out.update(turn_before_a_tool(response_choice, self.end_ids))
        infer_request.messages.extend(pending)
        return out

    # --- internals -------------------------------------------------------------------

    async def _session(self, req: Any) -> Session:
        config = self.env_config(req.data_dict or {})
        if req.uuid in self.sessions:  # a rollout restarted under the same id: release the stale session first
            await self._close(req.uuid)
        session = Session(Wrapper(config, self.limits), str(config["reset_kwargs"]["task_id"]), self.max_turns)
        self.sessions[req.uuid] = session
        self._envs[req.uuid] = session.wrapper
        return session

    async def _close(self, uuid: str) -> None:
        await self._close_and_remove(uuid)
        self.sessions.pop(uuid, None)

    def _open(self, session: Session) -> tuple[list[dict[str, str]], list[dict[str, Any]]] | None:
        try:
            return session.open()
        except RemoteError as exc:
            self._fail(session, f"opening a session on {session.wrapper.base_url}: {exc}")
            return None

    def _step(self, session: Session, text: Any, finish: str | None, n_tokens: int) -> list[dict[str, str]]:
        try:
            return session.step(text if isinstance(text, str) else "", finish, n_tokens)
        except RemoteError as exc:
            self._fail(session, f"step on {session.wrapper.base_url}: {exc}")
            return []

    def _count_lost(self, session: Session) -> None:
        """An episode that ended lost to the server side (its server, or the server's user simulator) counts against
        ``rollout.max_failed_share``."""
        if session.record is not None and session.record.termination in _LOST:
            self.lost.add(session.wrapper.base_url, session.record.error)

    @staticmethod
    def _fail(session: Session, error: str) -> None:
        logger.warning(f"{KEY}: {error}")
        session.record = EpisodeRecord.unstarted(error, session.wrapper.base_url, Termination.ENV_ERROR)


def register() -> None:
    current = multi_turns.get(KEY)
    if current is not None and current.__qualname__ != OpenEnvUserScheduler.__qualname__:
        raise ValueError(f"multi_turns[{KEY!r}] already holds {current!r}; refusing to replace it")
    multi_turns[KEY] = OpenEnvUserScheduler
    exclusion.install()


register()
