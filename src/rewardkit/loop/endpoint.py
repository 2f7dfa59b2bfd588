"""One OpenAI-compatible chat endpoint with the retry policy every caller here shares.

The user simulator and the HTTP agent both call chat models behind ``swift deploy``, vLLM or a
hosted API. Every call goes through :meth:`ChatEndpoint.complete`, one guard with retries:

- transport failures and server errors (timeouts, refused or dropped connections, 429 and 5xx, and
  a 200 whose body is not a chat completion: not JSON, no ``choices``) are retried with jittered
  exponential backoff, then raised as the caller's own error class naming the endpoint, so a
  report can say "the simulator was down" rather than "the task failed";
- a configuration error that no retry can cure (HTTP 401, 403, 404: a wrong key, an unknown model
  name, a wrong URL) raises :class:`EndpointConfigError`, which stops the run;
- any other 4xx is the caller's error at once (a 400 about the context length is
  :class:`ContextOverflow` where the caller asks for it);
- a breaker: after ``breaker_after`` calls in a row failed their retries, the endpoint is taken as down and every
  call fails at once (the caller's error, counted as short-circuited) for ``breaker_cooldown_s``; then one call is
  let through, and a success closes it. A dead simulator costs a run seconds, not every episode's full backoff.

What the model wrote is read, never trusted: the reply comes back as a :class:`Completion` whose
text, finish reason and token count are plain values whatever the server sent (content parts are
joined, a count that is not a finite number >= 0 is 0); the tool calls are passed on as sent, for
the caller to read as the model's. The client is synchronous on purpose: ms-swift runs each
multi-turn hook under a fresh event loop, and an async client cached across calls would be bound
to a loop that is already closed.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardkit.errors import UserError
from rewardkit.loop import transport
from rewardkit.loop.ledger import Ledger


class _Retry(Exception):
    """A transient failure worth another attempt (its message becomes the final error's cause)."""


class ContextOverflow(Exception):
    """The request outgrew the model's context (an HTTP 400 saying so): the conversation's fault, not the server's."""


class EndpointConfigError(UserError, ValueError):
    """The endpoint refuses this client or model for good (401, 403, 404): stop the run, fix the options."""


# How vLLM, SGLang, ms-swift and hosted APIs word a prompt longer than the context.
_OVERFLOW = re.compile(r"context length|context window|maximum.{0,40}length|too long|max_model_len", re.IGNORECASE)
_CONFIG = {401: "check the API key", 403: "check the API key", 404: "fix the model name or the URL"}


@dataclass(frozen=True)
class Completion:
    """The first choice of a chat completion, as plain values."""

    text: str  # the content as text: "" when empty, null or not text; content parts joined
    tool_calls: Any  # as the server sent them (None when absent): the model's, any shape
    finish_reason: str | None
    completion_tokens: int  # 0 when absent or not a finite number >= 0
    prompt_tokens: int = 0  # likewise


Accept = Callable[[Completion], "str | None"]  # a reply -> why it is not taken, or None
# Why a model's text (or the JSON read out of it) is refused when it holds a lone surrogate, which json.loads makes of
# "\ud800": no UTF-8 file or database can store it.
NOT_TEXT = "holds a lone surrogate (\\ud800-\\udfff alone), which is not Unicode text; write characters only"


def empty_reply(reply: Completion) -> str | None:
    """Why a reply that must hold text is not taken (no text at all, whatever its finish reason), or None."""
    return None if reply.text.strip() else f"empty reply (finish_reason={reply.finish_reason!r})"


def message_text(content: Any) -> str:
    """A message's content as text: a string as is, OpenAI's content parts (``[{"type": "text", "text": …}]``,
    or bare strings) joined, anything else (null, a number, an object without text) empty."""
    if isinstance(content, str):
        return content
    parts = [content] if isinstance(content, Mapping) else content if isinstance(content, list) else []
    texts = [p if isinstance(p, str) else p.get("text") if isinstance(p, Mapping) else None for p in parts]
    return "".join(t for t in texts if isinstance(t, str))


def token_count(value: Any) -> int:
    """A reported token count, or 0 where it is not a finite number >= 0 (NaN, negative, a string, a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value) if math.isfinite(value) and value >= 0 else 0


def served_models(base_url: str, api_key: str = "EMPTY", timeout_s: float = 10.0) -> list[str]:
    """The model names an endpoint lists (``GET /models``); ValueError when it cannot be had or is not a list."""
    try:
        status, raw = transport.get(base_url.rstrip("/") + "/models", {"Authorization": f"Bearer {api_key}"}, timeout_s)
    except transport.TransportError as exc:
        raise ValueError(f"{'timed out' if exc.timeout else 'connection failed'}: {exc}") from exc
    if status != 200:
        raise ValueError(transport.status_message(status, raw))
    try:
        data = json.loads(raw)
        return [str(m["id"]) for m in data["data"]]
    except (ValueError, RecursionError, TypeError, KeyError) as exc:  # a listing that is not one
        raise ValueError(f"malformed model list: {exc}") from exc


def only_model(base_url: str, hint: str, api_key: str = "EMPTY", timeout_s: float = 10.0) -> str:
    """The one model an endpoint serves (``GET /models``); ValueError saying why not (``hint``: what to do)."""
    try:
        models = served_models(base_url, api_key, timeout_s)
    except ValueError as exc:
        raise ValueError(f"cannot list its models ({exc}); is the server up?") from exc
    if len(models) != 1:
        raise ValueError(f"serves {len(models)} models {models}; {hint}")
    return models[0]


def check_model(base_url: str, model: str, hint: str, api_key: str = "EMPTY", timeout_s: float = 10.0) -> None:
    """ValueError ``serves no model 'x' (it serves [...]); <hint>`` when the endpoint lists its models and
    ``model`` is not one of them. An endpoint that cannot list them passes: a server that is down is the
    run's infrastructure failure (its episodes are rerun), and an unknown model still stops the run at its
    first 404."""
    try:
        models = served_models(base_url, api_key, timeout_s)
    except ValueError:
        return
    if model not in models:
        raise ValueError(f"serves no model {model!r} (it serves {models}); {hint}")


@dataclass(frozen=True)
class EndpointSettings:
    """How every call to one endpoint is made, the agent's and the simulator's alike; checked when built."""

    api_key: str = "EMPTY"  # "EMPTY": local servers without a key
    timeout_s: float = 60.0  # seconds per HTTP call
    retries: int = 3  # extra attempts after the first, on transient failures only
    backoff_s: float = 1.0  # attempt n sleeps backoff_s * 2**(n - 1), plus jitter
    concurrency: int = 32  # requests in flight at once
    breaker_after: int = 5  # calls in a row that failed their retries before the endpoint is taken as down
    breaker_cooldown_s: float = 30.0  # how long every call then fails at once, before one is tried again

    def __post_init__(self) -> None:
        found = _settings_problem(self)
        if found is not None:
            name, expected = found
            raise ValueError(f"EndpointSettings.{name} must be {expected}, got {getattr(self, name)!r}")


def _settings_problem(s: EndpointSettings) -> tuple[str, str] | None:
    """The first field of ``s`` out of its range, and what it must be."""
    if not isinstance(s.api_key, str) or not s.api_key:
        return "api_key", "a non-empty string (EMPTY for servers without a key)"
    for name, low in (("retries", 0), ("concurrency", 1), ("breaker_after", 1)):
        value = getattr(s, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            return name, f"a whole number >= {low}"
    for name, bound in (("timeout_s", "> 0"), ("backoff_s", ">= 0"), ("breaker_cooldown_s", ">= 0")):
        value = getattr(s, name)
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not number or not (value > 0 if bound == "> 0" else value >= 0):
            return name, f"a finite number of seconds {bound}"
    return None


class ChatEndpoint:
    """``complete`` is thread-safe and blocks; at most ``settings.concurrency`` requests are in flight."""

    def __init__(
        self,
        base_url: str,
        model: str,
        error: Callable[[str, str], Exception],
        settings: EndpointSettings = EndpointSettings(),
        *,
        overflow: bool = False,
        ledger: Ledger | None = None,
        timeout_hint: str = "",
    ) -> None:
        """``overflow``: raise :class:`ContextOverflow` for a 400 about the context length, not ``error``;
        ``ledger``: where every request, retry and failure is counted; ``timeout_hint``: what a timed-out request's
        error adds (which key sets the timeout)."""
        self.base_url, self.model, self.error = base_url, model, error
        self.ledger = ledger if ledger is not None else Ledger("endpoint")
        self.ledger.endpoint = base_url
        self.retries, self.backoff_s, self.overflow = settings.retries, settings.backoff_s, overflow
        # Chats go through rewardkit.loop.transport (a fraction of the SDK's CPU per request); the SDK lists models.
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key, self._timeout_s = settings.api_key, settings.timeout_s
        self._timeout_hint = timeout_hint
        self._headers = {"Authorization": f"Bearer {settings.api_key}"}
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        self._breaker_after, self._cooldown_s = settings.breaker_after, settings.breaker_cooldown_s
        self._failed_in_a_row, self._open_until = 0, 0.0
        self._breaker = threading.Lock()

    def complete(self, messages: Sequence[dict[str, Any]], accept: Accept | None = None, **params: Any) -> Completion:
        """The first choice of a chat completion that ``accept`` takes (None: any; a refused one is retried like a
        server error); raises ``error(endpoint, why)`` after the retries, :class:`EndpointConfigError` at once."""
        self._check_breaker()
        try:
            completion = self._complete(messages, accept, params)
        except (EndpointConfigError, ContextOverflow):  # the options' fault, or the conversation's: not the server's
            raise
        except Exception:
            self._trip()
            raise
        with self._breaker:
            self._failed_in_a_row = 0
        return completion

    def _check_breaker(self) -> None:
        with self._breaker:
            wait = self._open_until - time.monotonic()
            if wait <= 0:
                return
            failed = self._failed_in_a_row
        self.ledger.short_circuit()
        raise self.error(
            self.base_url, f"not called: {failed} calls in a row failed, the breaker is open for another {wait:.0f} s"
        )

    def _trip(self) -> None:
        with self._breaker:
            self._failed_in_a_row += 1
            if self._failed_in_a_row >= self._breaker_after:
                self._open_until = time.monotonic() + self._cooldown_s

    def _complete(
        self, messages: Sequence[dict[str, Any]], accept: Accept | None, params: dict[str, Any]
    ) -> Completion:
        attempts = self.retries + 1
        cause = ""
        for attempt in range(attempts):
            if attempt:  # exponential backoff, jittered so retrying workers do not stampede together
                delay = self.backoff_s * 2 ** (attempt - 1)
                time.sleep(delay + random.uniform(0, 0.1 * delay))
            start = time.perf_counter()
            try:
                completion = self._call(messages, params)
            except _Retry as exc:
                self.ledger.request(time.perf_counter() - start, retry=attempt > 0, error=True)
                cause = str(exc)
                continue
            except Exception:
                self.ledger.request(time.perf_counter() - start, retry=attempt > 0, error=True)
                self.ledger.failure()
                raise
            refused = None if accept is None else accept(completion)
            self.ledger.request(
                time.perf_counter() - start,
                completion.prompt_tokens,
                completion.completion_tokens,
                retry=attempt > 0,
                error=refused is not None,
            )
            if refused is None:
                return completion
            cause = refused
        self.ledger.failure()
        raise self.error(self.base_url, f"no reply after {attempts} attempt(s); last error: {cause}")

    def _call(self, messages: Sequence[dict[str, Any]], params: dict[str, Any]) -> Completion:
        body = {"model": self.model, "messages": list(messages), **params}
        try:
            with self._slots:
                status, raw = transport.post(self._url, body, self._headers, self._timeout_s)
        except transport.TransportError as exc:
            if exc.timeout:
                raise _Retry(f"timed out after {self._timeout_s:g} s{self._timeout_hint}: {exc}") from exc
            raise _Retry(f"connection failed: {exc}") from exc
        if status != 200:
            raise self._status(status, transport.status_message(status, raw))
        return _completion(raw)

    def _status(self, code: int, message: str) -> Exception:
        if code == 429 or code >= 500:
            return _Retry(f"HTTP {code}: {message}")
        if self.overflow and code == 400 and _OVERFLOW.search(message or ""):
            return ContextOverflow(message)
        if code in _CONFIG:
            served = ""
            if code == 404:
                with contextlib.suppress(ValueError):  # the list, where it can be had
                    served = f"; it serves {served_models(self.base_url, self._api_key, 10.0)}"
            why = f"HTTP {code} for model {self.model!r} (not retried): {message}{served}; {_CONFIG[code]}"
            return EndpointConfigError(str(self.error(self.base_url, why)))
        # Other 4xx (a context too long where the caller did not ask, a bad request): retrying cannot help.
        return self.error(self.base_url, f"HTTP {code} (not retried): {message}")


def _completion(body: bytes) -> Completion:
    """A 200 body as a :class:`Completion`; one that is not a chat completion is the server's fault (retried)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError too
        raise _Retry(f"malformed response body (not JSON: {exc}): {body[:80]!r}") from exc
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise _Retry(f"malformed response body (no choices[0].message): {body[:80]!r}")
    usage = data.get("usage")
    finish = choice.get("finish_reason")
    return Completion(
        text=message_text(message.get("content")),
        tool_calls=message.get("tool_calls"),
        finish_reason=finish if isinstance(finish, str) else None,
        completion_tokens=token_count(usage.get("completion_tokens") if isinstance(usage, dict) else None),
        prompt_tokens=token_count(usage.get("prompt_tokens") if isinstance(usage, dict) else None),
    )
