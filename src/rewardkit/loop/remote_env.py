"""An episode run by a remote ``rewardkit env serve --openenv`` server, stepped as the scheduler steps an Episode.

    rollout:
      env_servers: [http://10.0.0.5:8000, http://10.0.0.6:8000]     # sessions spread over them, in turn

With ``rollout.env_servers`` set, the ``simulated_user`` scheduler (and ``synth agent`` and ``eval agent``, whose
loop is the same; nothing else in a recipe changes) runs each episode on one of those servers, in turn, instead of
in its own process: the database copy, the tool calls, the simulated user and
the user review all happen there, and the trainer only sends the policy's messages and reads back what answers
them. The server speaks OpenEnv's WebSocket protocol (``/ws``: ``reset``, ``step``, ``close`` messages); this client
needs only the ``websockets`` package, not openenv-core (whose stack ms-swift's does not allow). A token for the
servers (``$REWARDKIT_SERVE_TOKEN``) goes in an ``Authorization`` header.

The episode keeps the :class:`~rewardkit.loop.episode.Episode` surface the scheduler uses (``open``, ``agent_turn``,
``user_turn``, ``end``, ``take_pending``, ``infos``, ``close``); the user has already answered by the time
``agent_turn`` returns, so it never asks for a user turn. A server that cannot be reached, or that drops the session,
ends the episode as ``env_error``: infrastructure, left out of training.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.access import TOKEN_ENV
from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.tasks import task_digest
from rewardkit.envs.termination import Termination
from rewardkit.errors import UserError
from rewardkit.loop.config import RolloutLimits
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
    """The server answered with an error, or the session was lost."""


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

        try:
            token = os.environ.get(TOKEN_ENV)
            headers = {"Authorization": f"Bearer {token}"} if token else None
            ws_url = "ws" + self.url[len("http") :] if self.url.startswith("http") else self.url
            self._ws = connect(f"{ws_url}/ws", additional_headers=headers, open_timeout=self.timeout_s)
            opening = {"task_id": str(self.task.get("id")), "task_sha256": task_digest(self.task)}
            data = self._ask("reset", {**opening, "user_review": self.review})
        except (OSError, RemoteError, WebSocketException) as exc:
            self._fail(f"opening a session on {self.url}: {exc}")
            return None
        users = [m for m in data["observation"].get("messages", ()) if m.get("role") == "user"]
        self._settle(data)  # an episode can end at its opening (the simulator failed, or stopped at once)
        return None if self.done or not users else str(users[-1]["content"])

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

    def _ask(self, kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import WebSocketException

        try:
            self._ws.send(json.dumps({"type": kind, "data": dict(data)}))
            answer = json.loads(self._ws.recv(timeout=self.timeout_s))
        except (WebSocketException, TimeoutError, ValueError) as exc:
            raise RemoteError(f"{kind}: {exc}") from exc
        if answer.get("type") != "observation":
            raise RemoteError(f"{kind}: {answer.get('data', {}).get('message', answer)}")
        return dict(answer["data"])

    def _step(self, action: Mapping[str, Any]) -> None:
        try:
            data = self._ask("step", action)
        except (OSError, RemoteError) as exc:
            self._fail(f"step on {self.url}: {exc}")
            return
        observation = data["observation"]
        self.pending += [
            {"role": str(m["role"]), "content": str(m["content"])} for m in observation.get("messages", ())
        ]
        self._settle(data)

    def _settle(self, data: Mapping[str, Any]) -> None:
        """An ended episode's record, as the server wrote it."""
        observation = data["observation"]
        if data.get("done"):
            record = EpisodeRecord.read(observation.get("record"))
            self._record = record
            self.termination = Termination(record.termination) if record and record.termination else None
            if self.termination is None:
                self._fail(f"the server ended the episode without a record: {observation}")

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
