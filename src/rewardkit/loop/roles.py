"""A role played by a chat model that must answer in JSON: the tool simulator, the memory writer, the task proposer,
the judge. One class for all of them, so each gets the same retries, ledger and reply cache.

:class:`JsonRole` sends a conversation to an OpenAI-compatible endpoint (:class:`~rewardkit.loop.endpoint.ChatEndpoint`:
transport retries, backoff, concurrency limit, the breaker) and reads the reply as one JSON value: the text inside a
```` ```json ```` fence or the first ``{...}`` of the text, after any ``<think>`` block. The caller's ``check`` says
what is wrong with the value (a schema, a rule); a value that is not JSON, or that ``check`` refuses, is sent back to
the model with the problem ("your answer ... ; answer again"), NeMo Gym's way, up to ``attempts`` times. Then
:class:`RoleError`: infrastructure, never the policy's fault. Every answer refused is counted on the role's
:class:`~rewardkit.loop.ledger.Ledger` (``invalid``).

With a :class:`ReplyStore`, an accepted answer is stored under everything that shaped it (the role's fingerprint and
the first request's messages), so a run replays: in ``replay`` mode a miss is a :class:`RoleError`, and nothing is sent.

>>> parse_json('<think>the price is 3</think>```json\\n{"price": 3}\\n```')
({'price': 3}, None)
>>> parse_json("no JSON here")[1]
'the answer holds no JSON object: no JSON here'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rewardkit.envs.schemas import unencodable
from rewardkit.files.jsonl import dumps
from rewardkit.loop.endpoint import NOT_TEXT, ChatEndpoint, EndpointSettings, empty_reply
from rewardkit.loop.ledger import Ledger
from rewardkit.loop.replies import ReplyStore

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
ROLE_SETTINGS = EndpointSettings()
Check = Callable[[Any], "str | None"]  # the value -> what is wrong with it, or None


class RoleError(RuntimeError):
    """A role's endpoint gave no acceptable answer after its retries (or was down): the run's infrastructure."""

    def __init__(self, role: str, endpoint: str, message: str) -> None:
        super().__init__(f"{role} {endpoint}: {message}")
        self.role, self.endpoint = role, endpoint


def parse_json(text: str) -> tuple[Any, str | None]:
    """``(value, None)`` for the JSON a model's answer holds, else ``(None, why)``."""
    body = _THINK.sub("", text).strip()
    fenced = _FENCE.search(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    elif not body.startswith(("{", "[")):
        start = body.find("{")
        if start < 0:
            return None, f"the answer holds no JSON object: {text[:80]}"
        body = body[start:]
    try:
        value, _ = json.JSONDecoder().raw_decode(body)
    except (ValueError, RecursionError) as exc:
        return None, f"the answer is not valid JSON ({exc}): {body[:80]}"
    return value, None


class JsonRole:
    """One role (``role`` names it in the ledger and in errors) behind one endpoint; ``ask`` is thread-safe."""

    def __init__(
        self,
        role: str,
        base_url: str,
        model: str,
        *,
        settings: EndpointSettings = ROLE_SETTINGS,
        attempts: int = 3,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        cache: ReplyStore | None = None,
        version: int = 1,
    ) -> None:
        """``attempts``: answers asked for before :class:`RoleError` (the first included); ``version``: the caller's
        prompt version, part of the fingerprint, so that cached answers never outlive a change of wording."""
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"{role}: attempts must be a whole number >= 1, got {attempts!r}")
        self.role, self.name, self.model, self.attempts, self.cache = role, base_url, model, attempts, cache
        self.params = {"temperature": float(temperature), "max_tokens": max_tokens}
        self._endpoint = ChatEndpoint(
            base_url, model, lambda url, why: RoleError(role, url, why), settings, ledger=Ledger(role)
        )
        self.ledger = self._endpoint.ledger
        ident = [role, version, base_url, model, self.params]
        self._fingerprint = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()

    def fingerprint(self) -> str:
        return self._fingerprint

    def ask(self, messages: Sequence[Mapping[str, Any]], check: Check | None = None) -> Any:
        """The first answer that parses as JSON and that ``check`` accepts; :class:`RoleError` after ``attempts``."""
        key = _key(self._fingerprint, messages)
        if self.cache is not None:
            stored = self.cache.get(key)
            if stored is not None:
                value, problem = _judged(stored, check)
                if problem is None:
                    self.ledger.cache_hit()
                    return value
            elif self.cache.mode == "replay":
                raise RoleError(
                    self.role,
                    f"cache:{self.cache.path}",
                    "no stored answer for this request; run once with the cache in read_write mode",
                )
        conversation = [dict(m) for m in messages]
        problem = ""
        for _ in range(self.attempts):
            text = self._endpoint.complete(conversation, empty_reply, **self.params).text
            value, problem = _judged(text, check)
            if problem is None:
                if self.cache is not None:
                    self.cache.put(key, self._fingerprint, text)
                return value
            self.ledger.invalid()
            conversation += [
                {"role": "assistant", "content": text},
                {
                    "role": "user",
                    "content": f"Your answer was refused: {problem}. Answer again with only the corrected JSON.",
                },
            ]
        raise RoleError(self.role, self.name, f"no acceptable answer in {self.attempts} attempt(s); last: {problem}")


def _judged(text: str, check: Check | None) -> tuple[Any, str | None]:
    """The answer's value and what is wrong with it: not JSON, not text (every role's rule), or what ``check`` says."""
    value, problem = parse_json(text)
    if problem is None and (unencodable(text) or unencodable(value)):  # nothing could store it or write it out
        problem = f"the answer {NOT_TEXT}"
    if problem is None and check is not None:
        problem = check(value)
    return value, problem


def _key(fingerprint: str, messages: Sequence[Mapping[str, Any]]) -> str:
    payload = [fingerprint, [[m.get("role"), m.get("content")] for m in messages]]
    return hashlib.sha256(dumps(payload, sort_keys=True).encode()).hexdigest()
