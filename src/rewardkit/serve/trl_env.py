"""A served domain as TRL's ``environment_factory``: GRPOTrainer trains on it through the OpenEnv server.

    from rewardkit.serve.trl_env import environment_factory, task_completion
    trainer = GRPOTrainer(model=..., train_dataset=rows, reward_funcs=[task_completion],
                          environment_factory=environment_factory("http://127.0.0.1:8000", "retail"))

TRL (0.29) builds one environment per rollout, calls ``reset(**row)`` before generating, exposes every other public
method as a tool (``inspect.getmembers(env, inspect.ismethod)``: a name starting with ``_`` is skipped, an instance
attribute hides a method of its name), runs the tool calls the policy writes, appends their results as ``tool``
messages and trains on the policy's tokens only (each result is masked out of the loss). Each environment here is
one OpenEnv session on a ``rewardkit env serve --openenv`` server (openenv-core's client):

- ``reset(**row)`` opens the task the row names, by its ``task_id`` column or its ``task`` column (the task itself,
  as ``rewardkit build tau2-grpo`` writes it: its id, and its digest, which the server checks against its own
  task), and returns the simulated user's opening, which TRL appends to the prompt's last user message. A row
  that names no task, or two, is refused: never a task drawn at random;
- one method per domain tool, with the tool's parameters and description: it sends the call and returns the
  tool's result, as the harness wrote it (gates and approvals included);
- ``send_message(message)`` says something to the customer and returns the customer's reply: the simulated user
  answers through this tool, since TRL's loop ends at the first message without a tool call.

Those are the only public names of an environment: its own state and helpers are private, so no tool name but
``reset`` and ``send_message`` can meet one of them, and a tool TRL could not list (those two, a name starting
with ``_``, any name the class holds) fails :func:`environment_factory`, named.

The policy's last message (no tool call) ends the conversation: :func:`task_completion` sends it to the server as
the agent's closing words and returns the task-completion reward the server scored (None where the server left the
episode out of training: a simulator failure, a flagged user mistake).
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import WebSocketException

from rewardkit.envs import get_domain
from rewardkit.envs.access import refusal_reason
from rewardkit.envs.registry import DomainError
from rewardkit.envs.tasks import TaskError, task_digest
from rewardkit.loop.user_sim import STOP

JSON_TYPES: Mapping[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
ENDED = "(the conversation has ended)"
TIMEOUT_S = 600.0  # one step's answer may wait on the simulator's retries and the reviewer


class ServedEpisode:
    """One rollout's OpenEnv session; the domain's tools are added as methods by :func:`environment_factory`. Its
    state is private (TRL reads every public method as a tool, and an instance attribute would hide one)."""

    _url: str = ""

    def __init__(self) -> None:
        self._client: Any = None
        self._done = False
        self._reward: float | None = None
        self._record: Mapping[str, Any] | None = None

    def reset(self, task_id: Any = None, task: Any = None, **row: Any) -> str:
        """Open the row's task on the server; the user's opening, for the prompt (the row's other columns are
        TRL's). The session is kept from one reset to the next (TRL keeps its environments); one the server has
        closed meanwhile (idle past its ``--idle-s``) is replaced by a new one."""
        tid, digest = _row_task(task_id, task)
        try:
            result = self._session().reset(task_id=tid, task_sha256=digest)
        except WebSocketException:  # closed by the server while it waited: its slot is free for the new one
            self._drop()
            result = self._session().reset(task_id=tid, task_sha256=digest)
        self._done, self._reward, self._record = False, None, None
        self._settle(result)
        user = [m["content"] for m in result.observation["messages"] if m["role"] == "user"]
        return user[-1] if user else ""

    def _session(self) -> Any:
        """The open session, connected on first use; a refused handshake raises with the server's reason."""
        if self._client is None:
            client = GenericEnvClient(base_url=self._url, message_timeout_s=TIMEOUT_S).sync()
            try:
                client.connect()
            except ConnectionError as exc:
                client.close()  # its event loop's thread
                raise ConnectionError(f"{exc}{refusal_reason(exc)}") from exc
            self._client = client
        return self._client

    def send_message(self, message: str) -> str:
        """Say something to the customer and read their reply.

        Args:
            message: What to tell or ask the customer.
        """
        return self._send({"content": message}, "user")

    def _finish(self, closing: str) -> float | None:
        """End the conversation with the policy's last message (if it is still open); the server's reward."""
        if not self._done:
            self._send({"content": f"{closing}\n{STOP}"}, "user")
        return self._reward

    def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        call = {"name": name, "arguments": {k: v for k, v in arguments.items() if v is not None}}
        return self._send({"content": "", "tool_calls": [call]}, "tool")

    def _send(self, action: Mapping[str, Any], role: str) -> str:
        if self._done:
            return ENDED
        try:
            result = self._client.step(dict(action))
        except (RuntimeError, TimeoutError, OSError, WebSocketException) as exc:
            # The session is lost, or out of step with its answers: the rollout ends unscored (None, left out of
            # the advantages, as the server leaves infrastructure failures), and the next reset opens a new one.
            self._drop()
            self._done, self._reward, self._record = True, None, {"termination": "env_error", "error": str(exc)}
            return ENDED
        self._settle(result)
        texts = [str(m["content"]) for m in result.observation["messages"] if m["role"] == role]
        return "\n".join(texts) if texts else ENDED

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # a client whose connection already failed: nothing to release
                client.close()

    def _settle(self, result: Any) -> None:
        if result.done:
            self._done, self._reward, self._record = True, result.reward, result.observation.get("record")


def _row_task(task_id: Any, task: Any) -> tuple[str, str | None]:
    """The id of the task a row names and, from its ``task`` column, the task's digest; a row that names none, a
    ``task`` that is not a task, or a ``task_id`` that is not its task's id is refused."""
    if task is None:
        if task_id is None:
            raise TaskError(
                "reset: the row names no task; give the dataset a task_id column, or a task column (the task "
                "itself, as rewardkit build tau2-grpo writes it)"
            )
        return str(task_id), None
    try:
        value = json.loads(task) if isinstance(task, str) else task
    except ValueError as exc:
        raise TaskError(
            f"reset: the row's task column is not JSON ({exc}); write the task as build tau2-grpo does"
        ) from exc
    if not isinstance(value, Mapping) or "id" not in value:
        raise TaskError("reset: the row's task column is not a task with an id; write it as build tau2-grpo does")
    if task_id is not None and str(task_id) != str(value["id"]):
        raise TaskError(
            f"reset: the row's task_id {str(task_id)!r} is not the id of its task column ({str(value['id'])!r}); "
            "fix the row"
        )
    return str(value["id"]), task_digest(value)


def _tool_method(spec: Mapping[str, Any]) -> Callable[..., str]:
    """A method named and typed as the tool ``spec`` (an OpenAI function spec), its docstring TRL's description."""
    function = spec["function"]
    name, schema = function["name"], function.get("parameters") or {}
    required = set(schema.get("required") or ())
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    lines = [(function.get("description") or name).strip(), "", "Args:"]
    for arg, prop in (schema.get("properties") or {}).items():
        kind = JSON_TYPES.get(str(prop.get("type")), str)
        default = inspect.Parameter.empty if arg in required else None
        annotations[arg] = kind if arg in required else kind | None
        params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind))
        lines.append(f"    {arg}: {' '.join(str(prop.get('description') or arg).split())}")

    def method(self: ServedEpisode, **arguments: Any) -> str:
        return self._call(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines if len(lines) > 3 else lines[:1])
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    return method


def environment_factory(url: str, domain: str) -> type[ServedEpisode]:
    """The class TRL instantiates per rollout: sessions on the server at ``url`` serving ``domain`` (whose tools
    become its methods; the domain is loaded here for their specs)."""
    specs = get_domain(domain).tool_specs()
    methods: dict[str, Any] = {spec["function"]["name"]: _tool_method(spec) for spec in specs}
    own = [name for name in dir(ServedEpisode) if not name.startswith("_")]
    for name in methods:
        if name.startswith("_") or hasattr(ServedEpisode, name):
            raise DomainError(
                f"domain {domain!r}: tool {name!r} cannot be a tool of TRL's environment: TRL lists no method whose "
                f"name starts with _, and {', '.join(own)} are the environment's own; rename the tool"
            )
    return type(f"Served{domain.capitalize()}", (ServedEpisode,), {"_url": url, **methods})


def task_completion(
    completions: Sequence[Any], environments: Sequence[ServedEpisode], **kwargs: Any
) -> list[float | None]:
    """TRL reward: each rollout's episode closed with its last message, scored by the server (task completion)."""
    return [env._finish(_last_text(c)) for c, env in zip(completions, environments, strict=True)]


def _last_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion)):
        if message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return message["content"]
    return ""
