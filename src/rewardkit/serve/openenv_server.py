"""A domain as an OpenEnv environment: one episode per session, the simulated user and the reward on the server.

    rewardkit env serve --openenv --domain retail --port 8000          # loopback; elsewhere --token is required

Built on ``openenv`` (its types, its app's info routes ``/health``, ``/schema``, ``/metadata``): each WebSocket
session (``/ws``, what OpenEnv's ``EnvClient`` speaks) is one connection and gets its own :class:`DomainEnvironment`,
so sessions never share a database (:class:`Sessions`: the cap, the idle limit, every message answered). An episode
is the loop training runs (:class:`rewardkit.loop.drive.Conversation`: the harness's gates and approvals, the user
review):

- ``reset(task_id=..., split=..., seed=...)`` opens the episode on a private copy of the database: the task by id,
  else one drawn from ``split`` (default: every task) by ``seed`` (:class:`Opening`: any other field is refused).
  The observation's ``messages`` are the agent's system prompt (the domain's policy) and the simulated user's
  opening; ``tools`` the OpenAI function specs.
- ``step(AgentTurn(content=..., tool_calls=...))`` takes the agent's message (Hermes ``<tool_call>`` blocks in the
  text, or OpenAI-shaped ``tool_calls``), runs its calls under the harness's rules, lets the user answer when it
  is spoken to, and returns the new ``messages`` (tool results, the user's reply, the user's closing line too).
- When the episode ends, ``done`` is true, ``reward`` is ``task_completion`` (None for an episode left out of
  training: a simulator failure, a flagged user mistake), and ``record`` is the episode record
  (:class:`~rewardkit.envs.episode_record.EpisodeRecord`, ms-swift's ``rollout_infos``).

The user simulator, the rollout limits and the user review come from ``$REWARDKIT_CONFIG`` (``user_sim:`` and
``rollout:``), as in the ``simulated_user`` scheduler; a flagged user mistake is excluded by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import numbers
import random
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Literal

from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import ConcurrencyConfig, WSErrorCode
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.responses import JSONResponse
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from rewardkit.envs import Domain
from rewardkit.envs.registry import get_domain
from rewardkit.envs.task_verdict import checked_task, task_verdict
from rewardkit.envs.tasks import TaskError, task_digest
from rewardkit.envs.termination import Termination
from rewardkit.errors import UserError
from rewardkit.files.jsonl import dumps
from rewardkit.loop.agents import AgentReply
from rewardkit.loop.config import RolloutLimits, load_run_config
from rewardkit.loop.drive import Conversation
from rewardkit.loop.user_review import ModelReviewer, make_reviewer
from rewardkit.loop.user_sim import UserSimulator, make_simulator
from rewardkit.rewards import TaskCompletion
from rewardkit.serve import MAX_IDLE_S

MAX_SESSIONS = 64
IDLE_S = 600.0
ADMIT_WAIT_S = 2.0  # how long a handshake over the cap waits for a closing session's slot before it is refused
IDLE_CLOSE = 4408  # the WebSocket close code of a session idle past idle_s: HTTP's 408 in the private range
# A message's size past which it is refused unread: an agent's turn is a model's output, far smaller. What it costs
# to read grows with it (1 MB of JSON lists parses to ~30 MB of objects); `env serve` has uvicorn close a frame past
# four times this.
MAX_MESSAGE = 1 << 20
MAX_CALLS = 256  # tool calls one step may carry: a model's turn holds a few; 1 MiB of "[]" holds 340,000
SHOWN_PROBLEMS = 5  # of a refused message's fields, named in its error: the rest are counted
# OpenEnv's routes kept: what describes the environment. The rest open sessions (its HTTP MCP routes, its own
# /ws) or build an episode's database per request (/reset, /step, /state) outside the cap; a route a later version
# adds is left out too.
INFO_ROUTES = frozenset(
    {"/health", "/schema", "/metadata", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
log = logging.getLogger(__name__)


class NoEpisodeError(UserError, RuntimeError):
    """A step in a session with no episode open: none was, or the last one ended."""


class AgentTurn(Action):
    """The agent's message: its text (Hermes ``<tool_call>`` blocks included) and any OpenAI-shaped tool calls; how
    its generation finished (``length``: cut off, its calls not run) and its token count (the token budget). ``end``:
    an ending the trainer imposes (``max_turns``, its own turn limit; ``agent_error``, its endpoint failed), applied
    after the message if the episode is still open; with no content and no calls, applied at once."""

    content: str = ""
    tool_calls: list[dict[str, Any]] | None = Field(default=None, max_length=MAX_CALLS)  # checked before the items
    finish_reason: str | None = None
    n_tokens: int = 0
    end: Literal["max_turns", "agent_error"] | None = None


class EpisodeObservation(Observation):
    """What the agent sees next: the messages to append to its conversation; at reset the tools too; at the end
    the episode's record."""

    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    task_id: str | None = None
    termination: str | None = None
    record: dict[str, Any] | None = None


class Opening(BaseModel):
    """What a reset may carry; any other field is refused, naming it (a misspelt ``task_id`` never opens a task
    drawn at random). ``task_sha256``: the caller's digest of the task it names by ``task_id``."""

    model_config = ConfigDict(extra="forbid")

    seed: int | None = None
    episode_id: str | None = None
    task_id: str | None = None
    split: str | None = None
    user_review: Literal["exclude", "count", "off"] | None = None
    task_sha256: str | None = None

    @field_validator("task_id", mode="before")
    @classmethod
    def _id_text(cls, value: Any) -> Any:
        """An integer id is its text (``reset(task_id=0)``)."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class EpisodeState(State):
    """The session's episode: its task and how it ended (None while it runs)."""

    task_id: str | None = None
    termination: str | None = None


@dataclasses.dataclass(frozen=True)
class Served:
    """What every session of one server shares: the domain, its simulator and reviewer, the limits, and the ids of
    the tasks it can score (the others are refused at reset, naming why)."""

    ref: str
    domain: Domain
    simulator: UserSimulator
    reviewer: ModelReviewer | None
    limits: RolloutLimits
    playable: frozenset[str]

    def task(
        self, task_id: str | None, split: str | None, seed: int | None, digest: str | None = None
    ) -> Mapping[str, Any]:
        """The task by id (``digest``: the caller's :func:`~rewardkit.envs.tasks.task_digest` of it, which must be
        this server's), else one drawn by ``seed`` from the playable tasks of ``split`` (default: all). A digest
        without an id names a task too: refused, never answered with a task drawn at random."""
        tasks = self.domain.tasks()
        if task_id is None and digest is not None:
            raise TaskError("reset: task_sha256 names a task: send its task_id with it")
        if task_id is not None:
            if str(task_id) not in tasks:
                raise TaskError(f"reset: no task {task_id!r} in domain {self.domain.name!r}")
            task = tasks[str(task_id)]
            if digest is not None and digest != (ours := task_digest(task)):
                raise TaskError(
                    f"reset: task {task_id!r} is not the caller's: its sha256 is {ours[:12]} here and "
                    f"{str(digest)[:12]} there; serve the domain the caller's dataset was built from"
                )
            return checked_task(task, f"reset task {task_id}", self.ref)
        splits = self.domain.splits()
        if split is not None and split not in splits:
            raise TaskError(f"reset: no split {split!r} in domain {self.domain.name!r}; splits: {sorted(splits)}")
        ids = sorted(set(splits[split] if split is not None else tasks) & self.playable)
        if not ids:
            raise TaskError(f"reset: no playable task in split {split!r} of domain {self.domain.name!r}")
        return tasks[random.Random(seed).choice(ids)]


class DomainEnvironment(Environment[AgentTurn, EpisodeObservation, EpisodeState]):
    """One session: at most one episode open at a time. Bound to a server by :func:`environment_class`."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    served: ClassVar[Served]
    _reward: ClassVar[TaskCompletion]

    def __init__(self) -> None:
        super().__init__()
        self._conversation: Conversation | None = None
        self._task: Mapping[str, Any] = {}
        self._state = EpisodeState()

    def reset(self, /, seed: int | None = None, episode_id: str | None = None, **fields: Any) -> EpisodeObservation:
        """Open an episode as :class:`Opening` describes it (any other field is refused, ``self`` too: every name a
        client sends is a field). ``user_review``: what a flagged episode does here (the caller's mode: a trainer
        excludes, an evaluation counts); default the server's ``rollout.user_review``, else ``exclude``."""
        opening = Opening.model_validate({**fields, "seed": seed, "episode_id": episode_id})
        self.close()
        served = self.served
        review = opening.user_review
        limits = served.limits if review is None else dataclasses.replace(served.limits, user_review=review)
        self._task = served.task(opening.task_id, opening.split, opening.seed, opening.task_sha256)
        self._conversation = Conversation.start(
            served.domain, self._task, served.simulator, limits, reviewer=served.reviewer
        )
        tid = str(self._task.get("id"))
        self._state = EpisodeState(episode_id=opening.episode_id or uuid.uuid4().hex, step_count=0, task_id=tid)
        messages = list(self._conversation.messages)
        observation = EpisodeObservation(
            messages=messages + self._closing(), tools=served.domain.tool_specs(), task_id=tid
        )
        return self._ended(observation) if self._conversation.done else observation

    def step(self, action: AgentTurn, timeout_s: float | None = None, **kwargs: Any) -> EpisodeObservation:
        conversation = self._conversation
        if conversation is None or conversation.done:
            raise NoEpisodeError("no episode is open in this session: reset first (an ended episode needs a reset)")
        seen = len(conversation.messages)
        if action.content or action.tool_calls or action.end is None:  # an ending alone takes no turn
            reply = AgentReply(action.content, action.tool_calls or None, action.finish_reason, action.n_tokens)
            conversation.step(reply)
            seen += 1  # the agent's own message is the caller's: only what answers it goes back
        if action.end is not None and not conversation.done:
            assert conversation.episode is not None  # an open conversation has its episode
            conversation.episode.end(Termination(action.end))
        self._state.step_count += 1
        messages = conversation.messages[seen:]
        observation = EpisodeObservation(messages=messages + self._closing(), task_id=self._state.task_id)
        return self._ended(observation) if conversation.done else observation

    def _closing(self) -> list[dict[str, Any]]:
        """The user's line that ended the episode (a stop, a transfer: ``Turns.closing``), which the loop keeps out of
        the policy's conversation (nothing answers it) but a client appending each observation's messages reads as
        every other reply."""
        episode = self._conversation.episode if self._conversation is not None else None
        closing = episode.closing if episode is not None else None
        return [] if closing is None else [{"role": "user", "content": closing}]

    def _ended(self, observation: EpisodeObservation) -> EpisodeObservation:
        """The final observation: the reward, the record; the session's database is released."""
        assert self._conversation is not None
        result = self._conversation.result()
        infos = result.infos
        score = self._reward(
            [""],
            messages=[result.messages],
            task=[self._task],
            domain=[self.served.ref],
            rollout_infos=[infos],
        )[0]
        self._state.termination = infos.termination
        self.close()
        return observation.model_copy(
            update={"done": True, "reward": score, "termination": infos.termination, "record": infos.to_json()}
        )

    @property
    def state(self) -> EpisodeState:
        return self._state

    def close(self) -> None:
        if self._conversation is not None:
            self._conversation.close()
            self._conversation = None


def environment_class(ref: str) -> type[DomainEnvironment]:
    """The environment class serving domain ``ref`` (a built-in name, a path, an entry point), its simulator and
    limits from ``$REWARDKIT_CONFIG``: a bad config or domain fails here, before the server listens."""
    cfg = load_run_config()
    domain = get_domain(ref)
    # The episodes run here: a server never forwards them to other servers (rollout.env_servers is the trainer's).
    limits = dataclasses.replace(cfg.rollout, user_review=cfg.rollout.user_review or "exclude", env_servers=())
    playable = frozenset(tid for tid, task in domain.tasks().items() if task_verdict(ref, task).playable)
    simulator, reviewer = make_simulator(cfg.user_sim, domain), make_reviewer(cfg.user_sim)
    served = Served(ref, domain, simulator, reviewer, limits, playable)
    name = "".join(part.capitalize() for part in domain.name.replace("-", "_").split("_")) + "Environment"
    return type(name, (DomainEnvironment,), {"served": served, "_reward": TaskCompletion()})


class Sessions:
    """``/ws`` (an ASGI app): one session per WebSocket connection, which owns its slot and its
    :class:`DomainEnvironment` from its handshake to its close.

    - Over ``cap`` open connections a handshake waits :data:`ADMIT_WAIT_S` for a slot (a client that closes one
      session and opens the next meets its own closing there), then is refused before the socket opens: HTTP 503,
      the reason as the body's ``error`` (OpenEnv's client raises ``ConnectionError`` at connect).
    - A session that has waited ``idle_s`` for its client's next message is closed, its socket with it (close code
      :data:`IDLE_CLOSE`, the reason in the frame): it can open nothing more. The time the server spends answering
      (a step, the user simulator's reply) is never idle.
    - Every message gets one answer: an observation, the state, or an error naming what was wrong (over
      :data:`MAX_MESSAGE`, not JSON, not an object, an unknown type, a field a reset or a step does not take, a
      refused task); ``close`` ends the session. A message that breaks the server's own code is answered as an
      error too, and logged.
    - A session's messages are read and its episode runs on a thread of its own (its database's connection stays
      on it; a costly message stalls neither the other sessions nor ``/health``). When the session ends its
      database is released, then its slot, then the close frame (if any) is sent.
    """

    def __init__(self, environment: Callable[[], DomainEnvironment], cap: int, idle_s: float) -> None:
        self.environment, self.cap, self.idle_s = environment, cap, idle_s
        self.open = 0
        self._freed = asyncio.Condition()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        websocket = WebSocket(scope, receive, send)
        if not await self._admitted():
            reason = f"no session slot is free: {self.cap} are open (--max-sessions {self.cap}); retry once one closes"
            await websocket.send_denial_response(JSONResponse({"error": reason}, status_code=503))
            return
        try:
            await websocket.accept()
            closing = await self._serve(websocket)
        finally:
            async with self._freed:
                self.open -= 1
                self._freed.notify()
        if closing is not None:
            with contextlib.suppress(WebSocketDisconnect):  # the client left first: the close has no one to reach
                await websocket.close(*closing)

    async def _admitted(self) -> bool:
        """Whether a slot is free, or frees within :data:`ADMIT_WAIT_S`; if so it is this connection's."""
        async with self._freed:
            try:
                await asyncio.wait_for(self._freed.wait_for(lambda: self.open < self.cap), ADMIT_WAIT_S)
            except asyncio.TimeoutError:
                return False
            self.open += 1
            return True

    async def _serve(self, websocket: WebSocket) -> tuple[int, str] | None:
        """Answer the client's messages until it closes (None: the socket is closed) or idles past ``idle_s`` (the
        close frame to send); the episode is closed on return."""
        loop = asyncio.get_running_loop()
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openenv-session")
        env = await loop.run_in_executor(thread, self.environment)
        try:
            while True:
                try:
                    received = await asyncio.wait_for(websocket.receive(), self.idle_s)
                except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11
                    return IDLE_CLOSE, f"idle for {self.idle_s:g} s (--idle-s): the session is closed; open a new one"
                if received["type"] == "websocket.disconnect":
                    return None
                answer = await loop.run_in_executor(thread, self._answer, env, received)
                if answer is None:  # the client's close message
                    return 1000, ""
                await websocket.send_text(answer)
        except WebSocketDisconnect:  # gone while its answer was computed: nothing to send it to
            return None
        finally:
            await loop.run_in_executor(thread, env.close)
            thread.shutdown(wait=False)

    def _answer(self, env: DomainEnvironment, received: Any) -> str | None:
        """The answer to one received frame (JSON text), or None for a close; on the session's thread."""
        frame = received.get("text") or received.get("bytes") or b""
        if len(frame) > MAX_MESSAGE:
            text = f"the message is over 1 MiB ({len(frame)} characters, at most {MAX_MESSAGE}): refused unread"
            return _error(text, WSErrorCode.VALIDATION_ERROR)
        try:
            message = json.loads(frame)
        except (ValueError, RecursionError) as exc:  # not JSON (a number past the digits limit), nested too deep
            return _error(f"not a JSON message: {str(exc)[:200]}", WSErrorCode.INVALID_JSON)
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "close":
            return None
        if kind not in ("reset", "step", "state"):
            shown = f"type {kind!r:.60}" if isinstance(message, dict) else f"a JSON {_json_type(message)}"
            text = f"a message is a JSON object whose type is reset, step, state or close; got {shown}"
            return _error(text, WSErrorCode.UNKNOWN_TYPE)
        data = message.get("data", {})
        if not isinstance(data, dict):
            text = f"{kind}: data must be a JSON object, got a {_json_type(data)}"
            return _error(text, WSErrorCode.VALIDATION_ERROR)
        if kind == "state":
            return dumps({"type": "state", "data": env.state.model_dump()})
        try:
            observation = env.reset(**data) if kind == "reset" else env.step(AgentTurn.model_validate(data))
        except ValidationError as exc:
            return _error(_invalid(kind, exc), WSErrorCode.VALIDATION_ERROR)
        except UserError as exc:  # a refused task, a step with no episode open
            return _error(str(exc), WSErrorCode.EXECUTION_ERROR)
        except Exception as exc:  # the server's own bug: this message is answered, the server goes on
            log.exception("%s: a %s message raised", type(env).__name__, kind)
            return _error(f"{kind}: the server failed: {type(exc).__name__}: {exc}", WSErrorCode.EXECUTION_ERROR)
        return dumps({"type": "observation", "data": serialize_observation(observation)})


def _error(message: str, code: WSErrorCode) -> str:
    """An error answer as OpenEnv's client reads it (``RuntimeError("Server error: MESSAGE (code: CODE)")``)."""
    return dumps({"type": "error", "data": {"message": message, "code": code.value}})


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return names.get(type(value), "null")


def _invalid(kind: str, exc: ValidationError) -> str:
    """A refused reset or step: what is wrong with each field (the first :data:`SHOWN_PROBLEMS`, the others
    counted), and the fields it takes."""
    problems = []
    for error in exc.errors(include_url=False)[:SHOWN_PROBLEMS]:
        where = ".".join(str(part) for part in error["loc"]) or "data"
        problems.append(f"{where}: unknown field" if error["type"] == "extra_forbidden" else f"{where}: {error['msg']}")
    if exc.error_count() > SHOWN_PROBLEMS:
        problems.append(f"(and {exc.error_count() - SHOWN_PROBLEMS} more)")
    takes = Opening.model_fields if kind == "reset" else AgentTurn.model_fields
    return f"{kind}: {'; '.join(problems)} (a {kind} takes {', '.join(takes)})"


def create_app(ref: str, max_sessions: int = MAX_SESSIONS, idle_s: float = IDLE_S) -> Any:
    """The OpenEnv FastAPI app serving ``ref``: ``max_sessions`` at once, each closed after ``idle_s`` idle
    (:class:`Sessions`), and OpenEnv's info routes. The limits are checked as ``--max-sessions`` and
    ``--idle-s`` are, before the domain loads (NaN passes every comparison, and pydantic's bounds let it through)."""
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, numbers.Integral) or max_sessions < 1:
        raise UserError(f"create_app: max_sessions={max_sessions!r} is not an integer >= 1 (--max-sessions)")
    if isinstance(idle_s, bool) or not isinstance(idle_s, numbers.Real) or not 0 < idle_s <= MAX_IDLE_S:
        raise UserError(f"create_app: idle_s={idle_s!r} is not a finite number in (0, {MAX_IDLE_S:g}] (--idle-s)")
    environment = environment_class(ref)
    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=None)  # the sessions are ours
    app = create_fastapi_app(environment, AgentTurn, EpisodeObservation, concurrency_config=config)
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) in INFO_ROUTES]
    app.router.routes.append(WebSocketRoute("/ws", Sessions(environment, max_sessions, idle_s)))
    return app
