"""A served domain as TRL's ``environment_factory``: GRPOTrainer trains on it through the OpenEnv server.

    from rewardkit.serve.trl_env import environment_factory, task_completion
    trainer = GRPOTrainer(model=..., train_dataset=rows, reward_funcs=[task_completion],
                          environment_factory=environment_factory("http://127.0.0.1:8000", "retail"))

TRL (0.29) builds one environment per rollout, calls ``reset(**row)`` before generating, exposes every other public
method as a tool, runs the tool calls the policy writes, appends their results as ``tool`` messages and trains on
the policy's tokens only (each result is masked out of the loss). Each environment here is one OpenEnv session on
a ``rewardkit env serve --openenv`` server (openenv-core's client):

- ``reset(task_id=...)`` opens the row's task (its ``task_id`` column; a ``task`` column, when the row has one, must
  be the server's task) and returns the simulated user's opening, which TRL appends to the prompt's last user
  message;
- one method per domain tool, with the tool's parameters and description: it sends the call and returns the
  tool's result, as the harness wrote it (gates and approvals included);
- ``send_message(message)`` says something to the customer and returns the customer's reply: the simulated user
  answers through this tool, since TRL's loop ends at the first message without a tool call. (Every other public
  method would be a tool too: the session's own helpers are private.)

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
from rewardkit.envs.tasks import task_digest
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
    """One rollout's OpenEnv session; the domain's tools are added as methods by :func:`environment_factory`."""

    url: str = ""

    def __init__(self) -> None:
        self._client: Any = None
        self.done = False
        self.reward: float | None = None
        self.record: Mapping[str, Any] | None = None

    def reset(self, task_id: str | None = None, task: Any = None, **row: Any) -> str:
        """Open the row's task on the server; the user's opening, for the prompt. A row that carries the task itself
        (a ``task`` column, as ``rewardkit build tau2-grpo`` writes it) has it checked against the server's."""
        if self._client is None:  # one session for the run: TRL keeps its environments and resets them
            self._client = GenericEnvClient(base_url=self.url, message_timeout_s=TIMEOUT_S).sync()
            self._client.connect()
        digest = None if task is None else task_digest(json.loads(task) if isinstance(task, str) else task)
        result = self._client.reset(task_id=None if task_id is None else str(task_id), task_sha256=digest)
        self.done, self.reward, self.record = False, None, None
        self._settle(result)
        user = [m["content"] for m in result.observation["messages"] if m["role"] == "user"]
        return user[-1] if user else ""

    def send_message(self, message: str) -> str:
        """Say something to the customer and read their reply.

        Args:
            message: What to tell or ask the customer.
        """
        return self._send({"content": message}, "user")

    def _finish(self, closing: str) -> float | None:
        """End the conversation with the policy's last message (if it is still open); the server's reward."""
        if not self.done:
            self._send({"content": f"{closing}\n{STOP}"}, "user")
        return self.reward

    def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        call = {"name": name, "arguments": {k: v for k, v in arguments.items() if v is not None}}
        return self._send({"content": "", "tool_calls": [call]}, "tool")

    def _send(self, action: Mapping[str, Any], role: str) -> str:
        if self.done:
            return ENDED
        try:
            result = self._client.step(dict(action))
        except (RuntimeError, TimeoutError, OSError, WebSocketException) as exc:
            # The session is lost, or out of step with its answers: the rollout ends unscored (None, left out of
            # the advantages, as the server leaves infrastructure failures), and the next reset opens a new one.
            self._drop()
            self.done, self.reward, self.record = True, None, {"termination": "env_error", "error": str(exc)}
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
            self.done, self.reward, self.record = True, result.reward, result.observation.get("record")


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
    clash = sorted(set(methods) & {"reset", "send_message"})
    if clash:
        raise ValueError(f"domain {domain!r}: tools {clash} clash with the session's own methods; rename them")
    return type(f"Served{domain.capitalize()}", (ServedEpisode,), {"url": url, **methods})


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
