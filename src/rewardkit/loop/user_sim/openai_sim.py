"""A customer played by a chat model behind any OpenAI-compatible endpoint (swift deploy, vLLM, hosted APIs).

Follows tau2-bench's user simulator: system prompt = the domain's simulation guidelines plus the task's
scenario, and the visible dialogue with roles flipped (the agent speaks as "user", the simulator's
own earlier messages are "assistant"), so a plain chat model continues as the customer.

Calls go through :class:`~rewardkit.loop.endpoint.ChatEndpoint` (retries, backoff, a
concurrency limit), one sync client shared by the worker threads (``asyncio.to_thread``) that call ``reply``.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.approvals import APPROVE, DECLINE
from rewardkit.envs.schemas import unencodable
from rewardkit.loop.endpoint import NOT_TEXT, ChatEndpoint, Completion, EndpointSettings, empty_reply
from rewardkit.loop.ledger import Ledger
from rewardkit.loop.user_sim.base import Progress, SimulatorError, Turn

SIM_SETTINGS = EndpointSettings()  # the user_sim section's defaults
PROMPT_VERSION = 2  # bump when the wording of the prompt changes: cached replies must not survive it


def _block(title: str, text: str) -> str:
    return f"{title}:\n{textwrap.indent(text, chr(9))}"


def render_scenario(scenario: Mapping[str, Any]) -> str:
    """``task["user_scenario"]`` as tau2's ``str(UserScenario)`` renders it (tab-indented blocks)."""
    lines = []
    if scenario.get("persona") is not None:
        lines.append(_block("Persona", str(scenario["persona"])))
    instructions = scenario.get("instructions")  # checked by rewardkit.envs.tasks: a mapping or free text
    if isinstance(instructions, Mapping):
        parts = []
        if instructions.get("domain") is not None:
            parts.append(f"Domain: {instructions['domain']}")
        for key, title in (
            ("reason_for_call", "Reason for call"),
            ("known_info", "Known info"),
            ("unknown_info", "Unknown info"),
            ("task_instructions", "Task instructions"),
            ("approval", "Approval requests"),  # rewardkit's: approve or decline what the agent asks approval for
        ):
            if instructions.get(key) is not None:
                parts.append(_block(title, str(instructions[key])))
        text = "\n".join(parts)
    elif isinstance(instructions, str):
        text = instructions
    else:
        raise ValueError(f"user_scenario.instructions must be a mapping or a string, got {type(instructions).__name__}")
    lines.append(_block("Instructions", text))
    return "\n".join(lines)


def system_prompt(guidelines: str, task: Mapping[str, Any]) -> str:
    """The domain's ``guidelines`` (how to play its user), then the task's scenario."""
    scenario = task.get("user_scenario")
    if not isinstance(scenario, Mapping):
        raise ValueError(f"task {task.get('id')!r} has no user_scenario mapping")
    return f"{guidelines.strip()}\n\n<scenario>\n{render_scenario(scenario)}\n</scenario>"


_PROMPTS: dict[tuple[str, int], tuple[Mapping[str, Any], str]] = {}  # (guidelines, id(task)) -> (task, its prompt)
_PROMPTS_MAX = 4096


def _system_prompt(guidelines: str, task: Mapping[str, Any]) -> str:
    """:func:`system_prompt`, kept for the tasks a run keeps asking about (each of an episode's turns asks again).
    Keyed by the task object, held in the entry so that its id stays its own; a dict changed in place after it was
    asked about is not seen (the domains' tasks are read once and never changed)."""
    key = (guidelines, id(task))
    found = _PROMPTS.get(key)
    if found is not None and found[0] is task:
        return found[1]
    prompt = system_prompt(guidelines, task)
    if len(_PROMPTS) >= _PROMPTS_MAX:
        _PROMPTS.clear()
    _PROMPTS[key] = (task, prompt)
    return prompt


def waiting_note(requests: Sequence[str]) -> str:
    """What the user sees of the requests waiting for their approval, and how to answer them (the markers)."""
    lines = "\n".join(f"- {r}" for r in requests)
    return (
        f"<approval_requests>\n{lines}\n</approval_requests>\nThe assistant is waiting for your approval of the "
        f"requests above. Answer as your scenario says: write {APPROVE} in your reply to approve them all, or "
        f"{DECLINE} to decline them all."
    )


def chat_messages(
    guidelines: str, task: Mapping[str, Any], dialogue: Sequence[Turn], requests: Sequence[str] = ()
) -> list[dict[str, str]]:
    """The request's messages: system prompt (with the waiting approval requests, if any), then the dialogue seen
    from the customer's side."""
    if not dialogue or dialogue[0].role != "agent" or dialogue[-1].role != "agent":
        raise ValueError("the dialogue must start with the agent's greeting and end with an agent turn")
    flipped = {"agent": "user", "user": "assistant"}
    system = _system_prompt(guidelines, task) + (f"\n\n{waiting_note(requests)}" if requests else "")
    return [{"role": "system", "content": system}] + [{"role": flipped[t.role], "content": t.text} for t in dialogue]


class OpenAISimulator:
    """The customer as a chat model, playing the user by ``guidelines`` (the domain's); ``reply`` is thread-safe and
    blocks (run it in a worker thread)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        guidelines: str,
        settings: EndpointSettings = SIM_SETTINGS,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> None:
        self.name = base_url
        self.model = model
        self.guidelines = guidelines
        self.temperature = float(temperature)  # 0 and 0.0 must give one fingerprint
        self.max_tokens = max_tokens
        self._endpoint = ChatEndpoint(base_url, model, SimulatorError, settings, ledger=Ledger("user"))
        self.ledger = self._endpoint.ledger

    def fingerprint(self) -> str:
        ident = [
            "openai",
            PROMPT_VERSION,
            self.name,
            self.model,
            self.temperature,
            self.max_tokens,
            self.guidelines.strip(),
        ]
        return hashlib.sha256(json.dumps(ident, ensure_ascii=False).encode()).hexdigest()

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        """The customer's next message; of ``progress`` only the waiting approval requests are read (a model judges
        completion itself).

        The simulator is infrastructure, not the policy: a reply without text (empty, null, blank, only tool
        calls, whatever its finish reason) or with a lone surrogate (not text: no log could hold it) is retried
        like a server error, then :class:`SimulatorError`. Content parts are read as their joined text, as the
        agent's are.
        """
        response = self._endpoint.complete(
            chat_messages(self.guidelines, task, dialogue, progress.requests),
            _usable,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        return response.text.strip()


def _usable(reply: Completion) -> str | None:
    """Why the customer's reply cannot be taken, or None."""
    return empty_reply(reply) or (f"the reply {NOT_TEXT}" if unencodable(reply.text) else None)
