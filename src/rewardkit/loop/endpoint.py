"""One OpenAI-compatible chat endpoint with the retry policy every caller here shares.

The user simulator and the HTTP agent both call chat models behind ``swift deploy``, vLLM or a
hosted API. Transient failures (timeouts, refused connections, 429 and 5xx, malformed or empty
replies) are retried with jittered exponential backoff; anything else fails at once. What finally
fails is raised as the caller's own error class, naming the endpoint, so a report can say "the
simulator was down" rather than "the task failed".

The client is synchronous on purpose: ms-swift runs each multi-turn hook under a fresh event loop,
and an async client cached across calls would be bound to a loop that is already closed.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import openai


class _Retry(Exception):
    """A transient failure worth another attempt (its message becomes the final error's cause)."""


class ContextOverflow(Exception):
    """The request outgrew the model's context (an HTTP 400 saying so): the conversation's fault, not the server's."""


# How vLLM, SGLang, ms-swift and hosted APIs word a prompt longer than the context.
_OVERFLOW = re.compile(r"context length|context window|maximum.{0,40}length|too long|max_model_len", re.IGNORECASE)


def only_model(base_url: str, hint: str, api_key: str = "EMPTY", timeout_s: float = 10.0) -> str:
    """The one model an endpoint serves (``GET /models``); ValueError saying why not (``hint``: what to do)."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
    try:
        models = [m.id for m in client.models.list()]
    except openai.OpenAIError as exc:
        raise ValueError(f"cannot list its models ({exc}); is the server up?") from exc
    if len(models) != 1:
        raise ValueError(f"serves {len(models)} models {models}; {hint}")
    return models[0]


class ChatEndpoint:
    """``complete`` is thread-safe and blocks; at most ``concurrency`` requests are in flight."""

    def __init__(
        self,
        base_url: str,
        model: str,
        error: Callable[[str, str], Exception],
        *,
        api_key: str = "EMPTY",
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        concurrency: int = 32,
        overflow: bool = False,
    ) -> None:
        """``overflow``: raise :class:`ContextOverflow` for a 400 about the context length, not ``error``."""
        if concurrency < 1 or retries < 0:
            raise ValueError(f"need concurrency >= 1 and retries >= 0, got {concurrency} and {retries}")
        self.base_url, self.model, self.error = base_url, model, error
        self.retries, self.backoff_s, self.overflow = retries, backoff_s, overflow
        # The SDK's own retries are off: ours also cover empty replies and share the backoff policy.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        self._slots = threading.BoundedSemaphore(concurrency)

    def complete(self, messages: Sequence[dict[str, Any]], accept: Callable[[Any], bool], **params: Any) -> Any:
        """A chat completion whose first choice ``accept`` takes; raises ``error(endpoint, why)``."""
        attempts = self.retries + 1
        cause = ""
        for attempt in range(attempts):
            if attempt:  # exponential backoff, jittered so retrying workers do not stampede together
                delay = self.backoff_s * 2 ** (attempt - 1)
                time.sleep(delay + random.uniform(0, 0.1 * delay))
            try:
                response = self._call(messages, params)
            except _Retry as exc:
                cause = str(exc)
                continue
            choice = response.choices[0]
            if accept(choice):
                return response
            cause = f"empty reply (finish_reason={getattr(choice, 'finish_reason', None)!r})"
        raise self.error(self.base_url, f"no reply after {attempts} attempt(s); last error: {cause}")

    def _call(self, messages: Sequence[dict[str, Any]], params: dict[str, Any]) -> Any:
        try:
            with self._slots:
                response = self._client.chat.completions.create(
                    model=self.model,
                    messages=list(messages),  # type: ignore[arg-type]
                    **params,
                )
        except openai.APITimeoutError as exc:  # before APIConnectionError: it is a subclass
            raise _Retry(f"timed out: {exc}") from exc
        except openai.APIConnectionError as exc:
            raise _Retry(f"connection failed: {exc}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 429 or exc.status_code >= 500:
                raise _Retry(f"HTTP {exc.status_code}: {exc.message}") from exc
            if self.overflow and exc.status_code == 400 and _OVERFLOW.search(exc.message or ""):
                raise ContextOverflow(exc.message) from exc
            # Other 4xx (bad model name, context too long, auth): retrying cannot help.
            raise self.error(self.base_url, f"HTTP {exc.status_code} (not retried): {exc.message}") from exc
        except openai.APIResponseValidationError as exc:
            raise _Retry(f"malformed response: {exc}") from exc
        choices = getattr(response, "choices", None) or []
        if not choices or choices[0].message is None:
            raise _Retry("a response without choices")
        return response
