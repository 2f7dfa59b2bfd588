"""A served domain as TRL's ``environment_factory``: GRPOTrainer trains on it through the OpenEnv server.

    from rewardkit.serve.trl_env import environment_factory, task_completion
    # TRL 1.8 and later: the environment owns its reward (TRL calls its get_reward)
    trainer = GRPOTrainer(model=..., train_dataset=rows,
                          environment_factory=environment_factory("http://127.0.0.1:8000", "retail"))
    # TRL 0.29 (no get_reward), or owns_reward=False: a reward function closes the episode
    trainer = GRPOTrainer(model=..., train_dataset=rows, reward_funcs=[task_completion],
                          environment_factory=environment_factory("http://127.0.0.1:8000", "retail"))

TRL builds one environment per rollout (0.29: all of them at start; from 1.8 a pool it reuses, grown to a batch's
rollouts), calls ``reset(**row)`` before generating, exposes every other public method as a tool (0.29:
``inspect.getmembers(env, inspect.ismethod)``; 1.16: the class's functions, ``get_reward`` left out too; a name
starting with ``_`` is skipped, and an instance attribute hides a method of its name), runs the tool calls the
policy writes, appends their results as ``tool`` messages and trains on the policy's tokens only (each result is
masked out of the loss). Each environment here is one OpenEnv session on a ``rewardkit env serve --openenv`` server
(OpenEnv's own client):

- ``reset(**row)`` opens the task the row names, by its ``task_id`` column or its ``task`` column (the task itself,
  as ``rewardkit build tau2-grpo`` writes it: its id, and its digest, which the server checks against its own
  task), and returns the simulated user's opening, which TRL appends to the prompt's last user message. A row
  that names no task, or two, is refused: never a task drawn at random;
- one method per domain tool, with the tool's parameters and description: it sends the call and returns the
  tool's result, as the harness wrote it (gates and approvals included);
- ``send_message(message)`` says something to the customer and returns the customer's reply: the simulated user
  answers through this tool, since TRL's loop ends at the first message without a tool call;
- ``get_reward()``, where the environment owns its reward (below).

Those are the only public names of an environment: its own state and helpers are private, so no tool name but
``reset``, ``send_message`` and ``get_reward`` can meet one of them, and a tool TRL could not list (those three, a
name starting with ``_``, any name the class holds) fails :func:`environment_factory`, named.

The policy's last message (no tool call) ends the conversation, and the server's task-completion reward reaches
TRL one of two ways:

- the environment owns it (``owns_reward``; by default wherever the installed TRL's GRPOTrainer calls an
  environment's ``get_reward``, read from its code: TRL 1.8 and later): TRL calls ``get_reward()`` once per rollout
  after generation, with no argument, so the conversation ends as the agent's stop without that last message (all
  the customer hears goes through ``send_message``); TRL logs the reward under the environment's class name
  (``rewards/ServedRetail/mean``), with weight 1, and needs no ``reward_funcs``. :func:`task_completion` beside it
  fails, naming the fix (it would count the reward twice);
- otherwise (TRL 0.29, or ``owns_reward=False``) :func:`task_completion` sends that last message to the server as
  the agent's closing words and returns the reward.

Either way an episode whose closing the server read as tool calls (which keep it open) is ended by a stop alone,
and the reward is None where the server left the episode out of training (a simulator failure, a flagged user
mistake) or the session was lost. TRL turns None into NaN: from TRL 1.6 a rollout every reward source scored None
is left out (no advantage, outside its group's baseline and the logged reward; TRL logs a warning), while a
reward function beside it that scores the rollout still counts; TRL 0.29 sums a None as 0 (an unscored rollout
counts as a failure in its group).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import json
import keyword
import re
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, ClassVar

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
REFUSED = "Server error:"  # how OpenEnv's client raises a server's error answer (the session stays open)
TIMEOUT_S = 600.0  # one step's answer may wait on the simulator's retries and the reviewer
GET_REWARD = "get_reward"  # the method through which TRL's GRPOTrainer (1.8 and later) lets an environment score


class ServedEpisode:
    """One rollout's OpenEnv session; the domain's tools are added as methods by :func:`environment_factory`. Its
    state is private (TRL reads every public method as a tool, and an instance attribute would hide one)."""

    _url: str = ""
    _owns_reward: ClassVar[bool] = False  # whether the class has TRL's get_reward (environment_factory sets it)

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
        self._done, self._reward, self._record = False, None, None  # a failed reset leaves no earlier reward behind
        try:
            result = self._session().reset(task_id=tid, task_sha256=digest)
        except WebSocketException:  # closed by the server while it waited: its slot is free for the new one
            self._drop()
            result = self._session().reset(task_id=tid, task_sha256=digest)
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

    def _finish(self, closing: str | None) -> float | None:
        """End the conversation (if it is still open) as the agent's stop, ``closing`` its last words (None: TRL's
        ``get_reward`` has none to give); the server's reward (None: left out). Words the server reads as tool calls
        keep the episode open: a stop alone then ends it, so a malformed last message is scored, never left out."""
        if not self._done and closing:
            self._send({"content": f"{closing}\n{STOP}"}, "user")
        if not self._done:
            self._send({"content": STOP}, "user")
        return self._reward

    def _get_reward(self) -> float | None:
        """The episode's task-completion reward, scored by the server once the conversation ends here (TRL calls it
        once per rollout, after generation; None: the server left the episode out, or the session was lost)."""
        return self._finish(None)

    def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        call = {"name": name, "arguments": {k: v for k, v in arguments.items() if v is not None}}
        return self._send({"content": "", "tool_calls": [call]}, "tool")

    def _send(self, action: Mapping[str, Any], role: str) -> str:
        if self._done or self._client is None:  # ended, or never opened (TRL resets first)
            return ENDED
        try:
            result = self._client.step(dict(action))
        except (RuntimeError, TimeoutError, OSError, WebSocketException) as exc:
            if type(exc) is RuntimeError and str(exc).startswith(REFUSED):
                # The server refused this message (too large, off its schema) and keeps the session: the policy's
                # malformed action gets the refusal as its answer, as the harness answers a malformed call.
                return f"error: {exc}"
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
        if not arg.isidentifier() or keyword.iskeyword(arg) or arg == "self":
            raise DomainError(
                f"tool {name!r}: its parameter {arg!r} cannot be a method's parameter, and TRL calls each tool as a "
                "method of the environment; rename it"
            )
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


@functools.cache
def trl_calls_get_reward() -> bool:
    """Whether the installed TRL's GRPOTrainer scores an environment through its ``get_reward`` (TRL 1.8 and later),
    read from the trainer's code, which then names the method, rather than from TRL's version; TRL is not imported.
    False without TRL: an environment with the method would show it to an older TRL as a tool."""
    try:
        spec = importlib.util.find_spec("trl.trainer.grpo_trainer")
    except ImportError:
        return False
    if spec is None:
        return False
    try:
        return f'"{GET_REWARD}"' in Path(str(spec.origin)).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # compiled or zipped: its version says (TRL 1.8 added the call)
        from packaging.version import Version

        return Version(version("trl")) >= Version("1.8")


def _trl_version() -> str:
    try:
        return f"TRL {version('trl')}"
    except PackageNotFoundError:
        return "no TRL"


def environment_factory(url: str, domain: str, *, owns_reward: bool | None = None) -> type[ServedEpisode]:
    """The class TRL instantiates per rollout: sessions on the server at ``url`` serving ``domain`` (whose tools
    become its methods; the domain is loaded here for their specs). ``owns_reward``: whether the class has
    ``get_reward``, through which TRL takes the server's reward itself (then pass no :func:`task_completion`); None:
    wherever the installed TRL calls it (:func:`trl_calls_get_reward`)."""
    if owns_reward not in (None, True, False):
        raise TypeError(f"environment_factory: owns_reward is True, False or None (TRL decides), not {owns_reward!r}")
    if owns_reward is None:
        owns_reward = trl_calls_get_reward()
    elif owns_reward and not trl_calls_get_reward():
        raise ValueError(
            f"environment_factory: owns_reward=True, but {_trl_version()} here never calls an environment's "
            f"{GET_REWARD} (its GRPOTrainer would list it as a tool); upgrade TRL to 1.8 or later, or leave "
            "owns_reward unset and pass reward_funcs=[task_completion]"
        )
    served = get_domain(domain)
    specs = served.tool_specs()
    methods: dict[str, Any] = {spec["function"]["name"]: _tool_method(spec) for spec in specs}
    own = sorted({*(name for name in dir(ServedEpisode) if not name.startswith("_")), GET_REWARD})
    for name in methods:
        if name.startswith("_") or name in own or hasattr(ServedEpisode, name):
            raise DomainError(
                f"domain {domain!r}: tool {name!r} cannot be a tool of TRL's environment: TRL lists no method whose "
                f"name starts with _, and {', '.join(own)} are the environment's own; rename the tool"
            )
    reward = {GET_REWARD: ServedEpisode._get_reward, "_owns_reward": True} if owns_reward else {}
    # Its name is the reward's in TRL's logs (rewards/ServedRetail/mean): the domain's name, as an identifier.
    name = "Served" + "".join(part.capitalize() for part in re.split(r"[^0-9A-Za-z]+", served.name) if part)
    return type(name, (ServedEpisode,), {"_url": url, **methods, **reward})


def task_completion(completions: Sequence[Any], environments: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """TRL reward: each rollout's episode closed with its last message, scored by the server (task completion);
    None for a rollout on another kind of environment (TRL's ``environment_factory`` may map several). Refused for
    environments that own their reward: TRL takes it through their ``get_reward``."""
    owning = sorted({type(env).__name__ for env in environments if getattr(env, "_owns_reward", False)})
    if owning:
        raise ValueError(
            f"task_completion: the environments {', '.join(owning)} own their reward: TRL takes it through their "
            f"{GET_REWARD}, so task_completion would count it twice; drop task_completion from reward_funcs, or "
            "build them with environment_factory(..., owns_reward=False) to keep it (the policy's last message "
            "then reaches the customer as its closing words)"
        )
    return [
        env._finish(_last_text(c)) if isinstance(env, ServedEpisode) else None
        for c, env in zip(completions, environments, strict=True)
    ]


def _last_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion)):
        if message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return message["content"]
    return ""
