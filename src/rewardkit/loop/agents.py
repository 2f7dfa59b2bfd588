"""The agents that synthesis and evaluation drive: a task's gold actions, an HTTP endpoint, a local checkpoint.

Every agent is a callable from the conversation so far (OpenAI-style messages, system first) to
its next message: a plain string, or an :class:`AgentReply` when it knows more (the endpoint's
parsed tool calls, why generation stopped, how many tokens it took). An endpoint that fails
after its retries raises :class:`AgentError`: the episode then ends as ``agent_error``, an
infrastructure failure that reports count apart and never score as a failed task.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.loop.endpoint import ChatEndpoint, ContextOverflow, only_model
from rewardkit.loop.gold import GoldAgent


class AgentError(RuntimeError):
    """The agent's endpoint failed after its retries (not the policy's fault: the episode is excluded)."""

    def __init__(self, endpoint: str, message: str) -> None:
        super().__init__(f"agent endpoint {endpoint}: {message}")
        self.endpoint = endpoint


@dataclass(frozen=True)
class AgentReply:
    text: str
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI-shaped, when the endpoint parsed them out of the text
    finish_reason: str | None = None
    n_tokens: int = 0


Agent = Callable[[Sequence[Mapping[str, Any]]], "str | AgentReply"]


def as_reply(out: str | AgentReply) -> AgentReply:
    return out if isinstance(out, AgentReply) else AgentReply(out if isinstance(out, str) else "")


def _openai_calls(native: Any) -> list[dict[str, Any]] | None:
    if not native:
        return None
    calls = [c.model_dump() if hasattr(c, "model_dump") else dict(c) for c in native]
    return [{k: v for k, v in c.items() if k in ("id", "type", "function")} for c in calls]


class OpenAIAgent:
    """A policy behind an OpenAI-compatible endpoint (``swift deploy``, vLLM, a hosted API); thread-safe.

    The tools go in the request's ``tools`` field, as ms-swift's agent template renders the ``tools``
    column in training. Replies keep the text as the endpoint returned it; parsed ``tool_calls``
    are passed on for servers that strip the call blocks from the text.
    """

    def __init__(
        self,
        base_url: str,
        tools: Sequence[Mapping[str, Any]],
        model: str | None = None,
        *,
        api_key: str = "EMPTY",
        temperature: float = 0.0,
        max_tokens: int = 1024,
        timeout_s: float = 120.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        concurrency: int = 32,
    ) -> None:
        self.name = base_url
        self.model = model or _only_model(base_url, api_key)
        self.tools = [dict(t) for t in tools]
        self.params = {"temperature": float(temperature), "max_tokens": max_tokens}
        self._endpoint = ChatEndpoint(
            base_url, self.model, AgentError, api_key=api_key, timeout_s=timeout_s, retries=retries,
            backoff_s=backoff_s, concurrency=concurrency, overflow=True,
        )  # fmt: skip

    def describe(self) -> dict[str, Any]:
        return {"kind": "openai", "base_url": self.name, "model": self.model, **self.params}

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> AgentReply:
        request: dict[str, Any] = {**self.params}
        if self.tools:
            request["tools"] = self.tools
        try:
            response = self._endpoint.complete(messages, _has_message, **request)
        except ContextOverflow:  # the conversation outgrew the context: the policy's ending, scored 0
            return AgentReply("", finish_reason="length")
        choice, usage = response.choices[0], getattr(response, "usage", None)
        return AgentReply(
            text=choice.message.content or "",
            tool_calls=_openai_calls(choice.message.tool_calls),
            finish_reason=choice.finish_reason,
            n_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        )


def _has_message(choice: Any) -> bool:
    return bool((choice.message.content or "").strip() or choice.message.tool_calls)


def _only_model(base_url: str, api_key: str) -> str:
    try:
        return only_model(base_url, "pass the model name", api_key)
    except ValueError as exc:
        raise AgentError(base_url, str(exc)) from exc


class CheckpointAgent:
    """A local checkpoint run in-process by ms-swift's transformers engine, with the template ms-swift trains with.

    Generation is serialised (one engine, one forward at a time); episodes still overlap their
    simulator and tool calls. Greedy at ``temperature=0``.
    """

    def __init__(
        self, model_dir: str | Path, tools: Sequence[Mapping[str, Any]], *, temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> None:  # fmt: skip
        from swift.infer_engine import RequestConfig, TransformersEngine

        self.name = str(model_dir)
        self.tools = [dict(t) for t in tools]
        self.engine = TransformersEngine(str(model_dir))
        self.config = RequestConfig(max_tokens=max_tokens, temperature=temperature)
        self.params = {"temperature": float(temperature), "max_tokens": max_tokens}
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {"kind": "checkpoint", "path": self.name, **self.params}

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> AgentReply:
        from swift.infer_engine import InferRequest
        from swift.template import MaxLengthError

        request = InferRequest(messages=[_template_message(m) for m in messages], tools=self.tools or None)
        try:
            with self._lock:
                response = self.engine.infer([request], self.config, use_tqdm=False)[0]
        except MaxLengthError:  # the conversation outgrew the model's context: the policy's ending, scored 0
            return AgentReply("", finish_reason="length")
        choice = response.choices[0]
        return AgentReply(
            text=choice.message.content or "",
            finish_reason=choice.finish_reason,
            n_tokens=int(response.usage.completion_tokens),
        )


def _template_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """What ms-swift's templates read: role and text (it re-parses calls from the text)."""
    return {"role": message["role"], "content": message.get("content") or ""}


def make_agent_factory(
    spec: str, tools: Sequence[Mapping[str, Any]], **options: Any
) -> tuple[Callable[[Mapping[str, Any]], Agent], dict[str, Any]]:
    """``gold``, an ``http(s)://`` URL, or a local checkpoint directory -> (task -> agent, a description).

    ``options`` go to the endpoint or checkpoint agent (model, temperature, max_tokens, ...).
    """
    if spec == "gold":
        return GoldAgent, {"kind": "gold"}
    if spec.startswith(("http://", "https://")):
        agent: OpenAIAgent | CheckpointAgent = OpenAIAgent(spec, tools, **options)
    else:
        path = Path(spec)
        if not (path / "config.json").is_file():
            raise ValueError(
                f"--agent {spec!r}: not 'gold', not an http(s):// URL, and not a model directory with a "
                "config.json; pass one of the three"
            )
        options.pop("model", None)
        agent = CheckpointAgent(path, tools, **{k: v for k, v in options.items() if k in ("temperature", "max_tokens")})
    return (lambda task: agent), agent.describe()
