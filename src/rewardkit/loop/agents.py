"""The agents that synthesis and evaluation drive: a task's gold actions, an HTTP endpoint, a local checkpoint.

Every agent is a callable from the conversation so far (OpenAI-style messages, system first) to
its next message: a plain string, or an :class:`AgentReply` when it knows more (the endpoint's
parsed tool calls, why generation stopped, how many tokens it took). An endpoint that fails
after its retries raises :class:`AgentError`: the episode then ends as ``agent_error``, an
infrastructure failure that reports count apart and never score as a failed task.

A reply the endpoint delivered is the model's, whatever its shape: empty or null content, content
parts (their text is read), tool calls that are not a list of call objects (each malformed one
becomes a call the harness refuses, a failed call), a token count that is not a count (0). The
episode scores it; nothing here raises on it.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.loop.endpoint import (
    ChatEndpoint,
    ContextOverflow,
    EndpointSettings,
    message_text,
    only_model,
    token_count,
)
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.ledger import Ledger
from rewardkit.loop.sampling import GREEDY, Sampling, SeededSampler

AGENT_SETTINGS = EndpointSettings(timeout_s=120.0)  # an agent's replies are longer than a customer's


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
    """The endpoint's ``tool_calls`` as well-formed OpenAI calls, or None when there are none.

    Anything that is not a list of call objects with a string name (a string, an object, a list of
    strings, a ``function`` that is not an object) is the model's malformed call: it becomes a call
    with no name whose arguments hold what was sent, which the harness answers with an error.
    """
    if native is None or native == [] or native == "" or native == {}:
        return None
    if not isinstance(native, list):  # one malformed call, as rewardkit.envs.tool_calls reads it
        return [_malformed(native)]
    return [_openai_call(c.model_dump() if hasattr(c, "model_dump") else c) for c in native]


def _malformed(sent: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "", "arguments": _dump(sent)}}


def _openai_call(call: Any) -> dict[str, Any]:
    fn = call.get("function", call) if isinstance(call, Mapping) else None  # flat {"name", "arguments"} too
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        return _malformed(call)
    arguments = fn.get("arguments")
    if arguments is not None and not isinstance(arguments, (str, Mapping)):  # still refused, but sendable
        arguments = _dump(arguments)
    out: dict[str, Any] = {"type": "function", "function": {"name": fn["name"], "arguments": arguments}}
    if isinstance(call, Mapping) and isinstance(call.get("id"), str) and call["id"]:
        out["id"] = call["id"]
    return out


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, default=repr)
    except (ValueError, RecursionError):  # nested too deeply to write back
        return repr(value)[:200]


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
        settings: EndpointSettings = AGENT_SETTINGS,
        sampling: Sampling = GREEDY,
        max_tokens: int = 1024,
    ) -> None:
        self.name = base_url
        self.model = model or _only_model(base_url, settings.api_key)
        self.tools = [dict(t) for t in tools]
        self.params = {**sampling.params(), "max_tokens": max_tokens}
        self._endpoint = ChatEndpoint(base_url, self.model, AgentError, settings, overflow=True, ledger=Ledger("agent"))
        self.ledger = self._endpoint.ledger

    def describe(self) -> dict[str, Any]:
        return {"kind": "openai", "base_url": self.name, "model": self.model, **self.params}

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> AgentReply:
        request: dict[str, Any] = {**self.params}
        if self.tools:
            request["tools"] = self.tools
        try:  # every reply is taken: an empty one is the model's (the episode ends it, scored)
            reply = self._endpoint.complete(messages, **request)
        except ContextOverflow:  # the conversation outgrew the context: the policy's ending, scored 0
            return AgentReply("", finish_reason="length")
        return AgentReply(
            text=reply.text,
            tool_calls=_openai_calls(reply.tool_calls),
            finish_reason=reply.finish_reason,
            n_tokens=reply.completion_tokens,
        )


def _only_model(base_url: str, api_key: str) -> str:
    try:
        return only_model(base_url, "pass the model name", api_key)
    except ValueError as exc:
        raise AgentError(base_url, str(exc)) from exc


class CheckpointAgent:
    """A local checkpoint run in-process by ms-swift's transformers engine, with the template ms-swift trains with.

    :meth:`replies` generates for many conversations in one batch (evaluation drives it so, see
    :mod:`rewardkit.loop.lockstep`); a call with one conversation is a batch of one. Greedy at
    temperature 0; above it, sampled as ``sampling`` says with a seed per conversation
    (:mod:`rewardkit.loop.sampling`), so a conversation's tokens do not depend on the others in its batch.
    Generation is serialised: one engine, one forward at a time.
    """

    def __init__(
        self,
        model_dir: str | Path,
        tools: Sequence[Mapping[str, Any]],
        *,
        sampling: Sampling = GREEDY,
        max_tokens: int = 512,
        thinking: bool | None = None,
    ) -> None:
        from swift.infer_engine import RequestConfig, TransformersEngine

        self.name = str(model_dir)
        self.tools = [dict(t) for t in tools]
        self.engine = TransformersEngine(str(model_dir))
        self.sampling = sampling
        self.config = RequestConfig(max_tokens=max_tokens, temperature=0.0)  # greedy; the sampler draws
        self.params = {**sampling.params(), "max_tokens": max_tokens}
        # thinking: the template's enable_thinking (None: the template's default; Qwen3's is off)
        self.template_kwargs = {} if thinking is None else {"enable_thinking": bool(thinking)}
        self._lock = threading.Lock()

    def sampled(self, sampling: Sampling) -> CheckpointAgent:
        """This agent sampling as ``sampling`` says, on the same engine: the model is loaded once."""
        twin = copy.copy(self)
        twin.sampling = sampling
        twin.params = {**sampling.params(), "max_tokens": self.params["max_tokens"]}
        return twin

    def describe(self) -> dict[str, Any]:
        return {"kind": "checkpoint", "path": self.name, **self.params}

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> AgentReply:
        return self.replies([messages], [None])[0]

    def replies(
        self, conversations: Sequence[Sequence[Mapping[str, Any]]], seeds: Sequence[int | None]
    ) -> list[AgentReply]:
        """The next message of each conversation, generated in one batch; ``seeds[i]`` seeds conversation i's
        sampling (None: unseeded). A conversation longer than the model's context ends as "length", scored 0."""
        from swift.infer_engine import InferRequest
        from swift.template import MaxLengthError

        requests = [
            InferRequest(
                messages=[_template_message(m) for m in c],
                tools=self.tools or None,
                chat_template_kwargs=dict(self.template_kwargs),
            )
            for c in conversations
        ]
        out: list[AgentReply] = [AgentReply("", finish_reason="length")] * len(requests)
        with self._lock:
            fits = []
            for i, request in enumerate(requests):  # the conversations that outgrew the context are left out
                try:
                    self.engine.template.encode(request)
                except MaxLengthError:
                    continue
                fits.append(i)
            if fits:
                hook = self._sampler([seeds[i] for i in fits])
                responses = self.engine._infer([requests[i] for i in fits], self.config, pre_infer_hook=hook)
                for i, response in zip(fits, responses, strict=True):
                    out[i] = _reply(response)
        return out

    def _sampler(self, seeds: list[int | None]) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """ms-swift's pre-inference hook adding the seeded sampler to the generate call (None when greedy)."""
        if self.sampling.greedy:
            return None
        from transformers import LogitsProcessorList

        def hook(kwargs: dict[str, Any]) -> dict[str, Any]:
            kwargs["inputs"]["logits_processor"] = LogitsProcessorList([SeededSampler(seeds, self.sampling)])
            return kwargs

        return hook


def _reply(response: Any) -> AgentReply:
    choice = response.choices[0]
    return AgentReply(
        text=message_text(choice.message.content),
        finish_reason=choice.finish_reason,
        n_tokens=token_count(response.usage.completion_tokens),
    )


def _template_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """What ms-swift's templates read: role and text (it re-parses calls from the text)."""
    return {"role": message["role"], "content": message.get("content") or ""}


def make_agent_factory(
    spec: str, tools: Sequence[Mapping[str, Any]], **options: Any
) -> tuple[Callable[[Mapping[str, Any]], Agent], dict[str, Any]]:
    """``gold``, an ``http(s)://`` URL, or a local checkpoint directory -> (task -> agent, a description).

    ``options`` go to the endpoint or checkpoint agent (model, sampling, max_tokens; ``settings``, an
    :class:`EndpointSettings`, for an endpoint only).
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
        agent = CheckpointAgent(path, tools, **{k: v for k, v in options.items() if k in ("sampling", "max_tokens")})
    return Shared(agent), agent.describe()


class Shared:
    """The one agent every task gets (an endpoint or a checkpoint serves them all), with its ledger if it has one."""

    def __init__(self, agent: OpenAIAgent | CheckpointAgent) -> None:
        self.agent = agent
        self.ledger: Ledger | None = getattr(agent, "ledger", None)
        # A local checkpoint generates for a batch of conversations at once; an endpoint batches on its server.
        self.batch: CheckpointAgent | None = agent if isinstance(agent, CheckpointAgent) else None

    def __call__(self, task: Mapping[str, Any]) -> Agent:
        return self.agent
