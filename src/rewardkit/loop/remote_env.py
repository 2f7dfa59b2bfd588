"""An episode run by a remote ``rewardkit env serve --openenv`` server, stepped as the scheduler steps an Episode.

    rollout:
      env_servers: [http://10.0.0.5:8000, http://10.0.0.6:8000]     # sessions spread over them, in turn

With ``rollout.env_servers`` set, the ``simulated_user`` scheduler (and ``synth agent`` and ``eval agent``, whose
loop is the same; nothing else in a recipe changes) runs each episode on one of those servers, in turn, instead of
in its own process: the database copy, the tool calls, the simulated user and
the user review all happen there, and the trainer only sends the policy's messages and reads back what answers
them. The server speaks OpenEnv's WebSocket protocol (``/ws``: ``reset``, ``step``, ``close`` messages); this client
needs only the ``websockets`` package, not openenv (whose stack ms-swift's does not allow). A token for the
servers (``$REWARDKIT_SERVE_TOKEN``) goes in an ``Authorization`` header.

The episode keeps the :class:`~rewardkit.loop.episode.Episode` surface the scheduler uses (``open``, ``agent_turn``,
``user_turn``, ``end``, ``take_pending``, ``infos``, ``close``); the user has already answered by the time
``agent_turn`` returns, so it never asks for a user turn. A server that cannot be reached, that drops the session,
or whose answer is off the OpenEnv schema (:func:`read_answer`, every field checked in one place) ends the episode
as ``env_error`` with the reason recorded: infrastructure, left out of training; nothing a server sends escapes
the episode.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from rewardkit.envs.access import TOKEN_ENV
from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.tasks import task_digest
from rewardkit.envs.termination import Termination
from rewardkit.errors import UserError
from rewardkit.loop.config import RolloutLimits, env_server_ws
from rewardkit.loop.episode import Turns

_OUTSIDE = frozenset({Termination.MAX_TURNS, Termination.AGENT_ERROR})  # the endings a trainer imposes


_TURN = itertools.count()  # one rotation for the process: the scheduler, synthesis and evaluation alike


def pick_server(servers: Sequence[str]) -> str:
    """The next of ``servers`` in turn: a process's episodes are spread over them evenly."""
    return servers[next(_TURN) % len(servers)]


def require_client() -> None:
    """Fail at once, naming the fix, where the WebSocket client is not installed (not at the first episode)."""
    try:
        import websockets.sync.client  # noqa: F401
    except ModuleNotFoundError as exc:
        raise UserError(
            "rollout.env_servers needs the websockets package on the trainer's side: pip install 'rewardkit[remote]'"
        ) from exc


class RemoteError(ConnectionError):
    """The server answered with an error or off the schema, or the session was lost."""


@dataclass(frozen=True)
class Answer:
    """A server's answer, checked: the messages that answer the agent (each a role and a text), and, once the
    episode has ended, the server's record of it (None while it runs)."""

    messages: list[dict[str, str]]
    record: EpisodeRecord | None


_RECORD_FIELDS = tuple(f.name for f in fields(EpisodeRecord))
_ENDINGS = ", ".join(t.value for t in Termination)
_HOLDS = {"goal": "a goal as Goal.to_json writes it (task, state_hash, outputs, evidence, stray_stops sorted, writes)"}


# The roles a server's messages may have: those that answer the agent (they join the policy's conversation), and at
# a reset the server's system prompt too (ignored: the trainer sends its own).
_ROLES = {"reset": ("system", "user"), "step": ("tool", "user")}


def read_answer(kind: str, text: str | bytes, task_id: str) -> Answer:
    """The answer to a ``reset`` or ``step`` (``kind``) of the episode of task ``task_id``, checked against the schema
    OpenEnv's server sends and this client reads: ``{"type": "observation", "data": {"observation":
    {"messages": [{"role", "content"}, ...], "record": {...}, "task_id": ...}, "reward": number|null, "done":
    bool}}``, or ``{"type": "error", "data": {"message": ...}}`` (a bare string for ``data`` taken as the message).
    Its messages have the roles of :data:`_ROLES`, its task (where named) is ``task_id``; a reset that leaves the
    episode open holds the user's opening; an ended episode holds its record, with a known termination and every
    field of the type :class:`EpisodeRecord` reads. Anything else raises :class:`RemoteError` naming the field and
    what it holds."""
    try:
        answer = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, or nested deeper than the parser goes
        raise RemoteError(f"{kind}: the answer is not JSON ({exc})") from None
    try:
        return _checked(kind, answer, task_id)
    except RecursionError:  # parsed, but deeper than copying or comparing the record goes
        raise RemoteError(f"{kind}: the answer is nested too deep to read") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _checked(kind: str, answer: Any, task_id: str) -> Answer:
    if not isinstance(answer, Mapping) or answer.get("type") not in ("observation", "error"):
        raise _off(kind, 'not an OpenEnv answer (an object of type "observation" or "error")', answer)
    data = answer.get("data")
    if answer["type"] == "error":
        message = data.get("message") if isinstance(data, Mapping) else data
        if not isinstance(message, str) or not message.strip():
            raise _off(kind, "an error without a message", data)
        raise RemoteError(f"{kind}: {message}")
    if not isinstance(data, Mapping):
        raise _off(kind, "data is not an object", data)
    return read_result(kind, data.get("observation"), data.get("reward"), data.get("done"), task_id)


def read_result(kind: str, observation: Any, reward: Any, done: Any, task_id: str) -> Answer:
    """An observation answer's three parts, checked as :func:`read_answer` checks them: where a client (OpenEnv's
    own, which ms-swift's ``openenv_scheduler`` uses) has already split the answer into observation, reward and
    done."""
    if not isinstance(observation, Mapping):
        raise _off(kind, "data.observation is not an object", observation)
    if not isinstance(done, bool):
        raise _off(kind, "data.done is not true or false", done)
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise _off(kind, "data.reward is not a number or null", reward)
    messages = observation.get("messages", [])
    if not isinstance(messages, list):
        raise _off(kind, "observation.messages is not a list", messages)
    for i, m in enumerate(messages):
        if not (isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise _off(kind, f"observation.messages[{i}] is not an object with a string role and content", m)
        if m["role"] not in _ROLES[kind]:
            raise _off(kind, f"observation.messages[{i}] has role {m['role']!r}, not {' or '.join(_ROLES[kind])}", m)
    named = observation.get("task_id")  # OpenEnv's observation names it; another server's may not
    if named is not None and str(named) != task_id:  # ids are compared as text, as the server reads them
        raise _off(kind, f"observation.task_id names another task than this episode's {task_id!r}", named)
    checked = [{"role": m["role"], "content": m["content"]} for m in messages]
    if not done:
        if kind == "reset" and not any(m["role"] == "user" for m in checked):
            raise _off(kind, "an open episode without the user's opening in observation.messages", messages)
        return Answer(checked, None)
    return Answer(checked, _record(kind, observation.get("record")))


def _record(kind: str, value: Any) -> EpisodeRecord:
    """An ended episode's record: a known termination, and no field that :meth:`EpisodeRecord.read` would drop."""
    if not isinstance(value, Mapping):
        raise _off(kind, "the episode ended without a record object in observation.record", value)
    ending = value.get("termination")
    if not isinstance(ending, str) or ending not in {t.value for t in Termination}:
        raise _off(kind, f"observation.record.termination is not one of {_ENDINGS}", ending)
    record = EpisodeRecord.read(value)
    assert record is not None  # a mapping is read
    read = record.to_json()
    for name in _RECORD_FIELDS:  # the reader takes a field of the wrong type as not recorded: here it is refused
        if name in value and read[name] != value[name]:
            holds = _HOLDS.get(name, "what an episode record holds there")
            raise _off(kind, f"observation.record.{name} is not {holds}", value[name])
    return record


def _off(kind: str, what: str, value: Any) -> RemoteError:
    shown = repr(value)
    return RemoteError(f"{kind}: off-schema answer: {what}; got {shown[:200]}{'…' if len(shown) > 200 else ''}")


class _Endpoint:
    """Where the episode runs, named as a simulator is (the scheduler's messages name ``ep.simulator.name``)."""

    def __init__(self, url: str) -> None:
        self.name = url


class RemoteEpisode(Turns):
    """One episode of ``task`` on the server at ``url``. ``limits``: the trainer's turn limit (sent with the turn
    that reaches it, so that the server ends the episode there), the review mode the episode runs under (the
    caller's: ``exclude`` in training, ``count`` in synthesis and evaluation), and how long one answer may take."""

    def __init__(self, url: str, task: Mapping[str, Any], limits: RolloutLimits, review: str) -> None:
        self.url, self.task, self.review = url.rstrip("/"), task, review
        self.max_turns, self.timeout_s = limits.max_turns, limits.env_timeout_s
        self.simulator = _Endpoint(self.url)
        self.termination: Termination | None = None
        self.error: str | None = None
        self.turns = 0
        self.pending: list[dict[str, str]] = []
        self._record: EpisodeRecord | None = None
        self._ws: Any = None

    # --- the scheduler's surface ---------------------------------------------------------------

    def prepare(self) -> None:
        """Nothing to prepare here: the server copies the database at reset."""

    def open(self) -> str | None:
        """The user's opening, or None if the episode could not start (the server unreachable or refusing)."""
        from websockets.exceptions import WebSocketException
        from websockets.sync.client import connect

        from rewardkit.envs.access import refusal_reason

        try:
            token = os.environ.get(TOKEN_ENV)
            headers = {"Authorization": f"Bearer {token}"} if token else None
            self._ws = connect(env_server_ws(self.url), additional_headers=headers, open_timeout=self.timeout_s)
            opening = {"task_id": str(self.task.get("id")), "task_sha256": task_digest(self.task)}
            answer = self._ask("reset", {**opening, "user_review": self.review})
        except (OSError, RemoteError, WebSocketException) as exc:
            self._fail(f"opening a session on {self.url}: {exc}{refusal_reason(exc)}")  # a refusal's reason too
            return None
        self._settle(answer)  # an episode can end at its opening (the simulator failed, or stopped at once)
        if self.done:
            self._closed(answer.messages)
            return None
        return [m["content"] for m in answer.messages if m["role"] == "user"][-1]  # the opening (read_answer)

    def agent_turn(
        self, text: str | None, finish_reason: str | None = None, n_tokens: int = 0, native: Any = None
    ) -> bool:
        """Send the policy's message; what answers it waits in :meth:`take_pending`. Never asks for a user turn:
        the server's user has answered already."""
        if self.termination is not None:
            return False
        self.turns += 1
        action: dict[str, Any] = {
            "content": text if isinstance(text, str) else "",
            "tool_calls": _calls(native),
            "finish_reason": finish_reason,
            "n_tokens": n_tokens,
        }
        if self.turns >= self.max_turns:
            action["end"] = "max_turns"
        self._step(action)
        return False

    def user_turn(self) -> None:
        """The server's user answers within the step: nothing to do here."""

    def end(self, reason: Termination, error: str | None = None) -> None:
        """End from outside: the server ends its episode with ``reason`` where it can take it, else here."""
        if self.termination is not None:
            return
        if reason in _OUTSIDE and self._ws is not None:
            self._step({"content": "", "end": reason.value})
        if self.termination is None:
            self._fail(error or f"ended by the trainer: {reason.value}", reason)

    def infos(self) -> EpisodeRecord:
        if self._record is not None:
            return self._record
        ending = self.termination or Termination.ENV_ERROR
        return EpisodeRecord.unstarted(self.error or "no record from the server", self.url, ending)

    def changes(self) -> None:
        """None: the database is the server's, and tracked there (the episode log's diff replays the calls here)."""
        return None

    def close(self) -> None:
        if self._ws is None:
            return
        from websockets.exceptions import WebSocketException

        try:
            with contextlib.suppress(OSError, WebSocketException):  # the session is gone already: nothing to release
                self._ws.send(json.dumps({"type": "close"}))
                self._ws.close()
        finally:
            self._ws = None

    # --- internals -------------------------------------------------------------------------------

    def _ask(self, kind: str, data: Mapping[str, Any]) -> Answer:
        from websockets.exceptions import WebSocketException

        try:
            self._ws.send(json.dumps({"type": kind, "data": dict(data)}))
            text = self._ws.recv(timeout=self.timeout_s)
        except (WebSocketException, TimeoutError) as exc:
            raise RemoteError(f"{kind}: {exc}") from exc
        return read_answer(kind, text, str(self.task.get("id")))

    def _step(self, action: Mapping[str, Any]) -> None:
        try:
            answer = self._ask("step", action)
        except (OSError, RemoteError) as exc:
            self._fail(f"step on {self.url}: {exc}")
            return
        self._settle(answer)
        self.pending += answer.messages if self.termination is None else self._closed(answer.messages)

    def _closed(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """An ended episode's last messages for the policy: its tool results; the user's line that ended it is its
        closing, which the in-process episode keeps out of the policy's conversation too."""
        users = [m["content"] for m in messages if m["role"] == "user"]
        self.closing = users[-1] if users else None
        return [m for m in messages if m["role"] != "user"]

    def _settle(self, answer: Answer) -> None:
        """An ended episode's record, as the server wrote it."""
        if answer.record is not None:
            self._record = answer.record
            self.termination = Termination(answer.record.termination)

    def _fail(self, error: str, ending: Termination = Termination.ENV_ERROR) -> None:
        self.termination, self.error = ending, error
        self._record = None


def _calls(native: Any) -> list[dict[str, Any]] | None:
    """The engine's parsed tool calls as OpenAI-shaped dicts (the server parses them as the in-process loop does)."""
    if not native:
        return None
    out = []
    for call in native if isinstance(native, Sequence) else [native]:
        dumped = call.model_dump() if hasattr(call, "model_dump") else call
        if isinstance(dumped, Mapping):
            out.append(dict(dumped))
    return out or None
