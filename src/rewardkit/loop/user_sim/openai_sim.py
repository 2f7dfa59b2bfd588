"""A customer played by a chat model behind any OpenAI-compatible endpoint (swift deploy, vLLM, hosted APIs).

The system prompt is tau2-bench's: the domain's simulation guidelines plus the task's scenario. The dialogue goes to
the model in one of two forms (``user_sim.prompt``):

- ``transcript`` (the default): the conversation as one transcript in the last user message ("Agent: ...",
  "Customer: ..."), then a reminder of who the model is and what it writes (:data:`REMINDER`, in the domain's
  language); a reply that starts with the customer's label has it taken off. An instruct model answers a user
  message in the assistant's voice, and here the voice asked for is the customer's;
- ``chat``: tau2-bench's role-flipped chat: the agent speaks as ``user``, the simulator's own earlier messages are
  ``assistant``. A model tuned on assistant turns then continues as the assistant, not the customer: on
  SmolLM2-135M-Instruct most of its replies were in the agent's voice (docs/multi_turn.md has the measurement).

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
from rewardkit.loop.user_sim.base import STOP, Progress, SimulatorError, Turn

SIM_SETTINGS = EndpointSettings()  # the user_sim section's defaults
PROMPTS = ("transcript", "chat")
PROMPT_VERSION = 3  # bump when the wording of the prompt changes: cached replies must not survive it


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


# How the transcript names its speakers, and what the model is reminded of after it, by the domain's language.
SPEAKERS = {"en": {"agent": "Agent", "user": "Customer"}, "zh": {"agent": "助手", "user": "客户"}}
REMINDER = {
    "en": (
        "You are the customer, not the agent. Write only the customer's next message: one or two short sentences "
        "in English, with facts from your scenario or from the agent only. Never offer help, never say you did "
        f"something for the customer. Asked for your approval, answer {APPROVE} or {DECLINE} as your scenario says. "
        f"Once what you asked for is done, or the agent says it cannot be, thank the agent and end with {STOP}."
    ),
    "zh": (
        "你是客户，不是助手。只写客户的下一条消息：一两句简短的中文，只用场景里或助手说过的信息。"
        "不要主动提供帮助，也不要说你替对方办了什么。"
        f"助手请你审批时，按场景写 {APPROVE} 或 {DECLINE}。"
        f"你的要求办完了，或助手说明办不了，就道谢并在末尾写 {STOP}。"
    ),
}


def _quoted(text: str) -> str:
    """A message as one transcript entry: its later lines indented (a line of the agent's text that starts
    "Customer:" is no customer turn) and the transcript's own tags escaped, so nothing a message says can end the
    transcript or write another speaker's turn."""
    text = text.replace("<conversation>", "<\\conversation>").replace("</conversation>", "<\\/conversation>")
    return text.replace("\n", "\n\t")


def chat_messages(
    guidelines: str,
    task: Mapping[str, Any],
    dialogue: Sequence[Turn],
    requests: Sequence[str] = (),
    *,
    prompt: str = "transcript",
    language: str = "en",
) -> list[dict[str, str]]:
    """The request's messages: system prompt (with the waiting approval requests, if any), then the dialogue seen
    from the customer's side, as ``prompt`` (one of :data:`PROMPTS`) lays it out."""
    if not dialogue or dialogue[0].role != "agent" or dialogue[-1].role != "agent":
        raise ValueError("the dialogue must start with the agent's greeting and end with an agent turn")
    system = _system_prompt(guidelines, task) + (f"\n\n{waiting_note(requests)}" if requests else "")
    if prompt == "chat":
        flipped = {"agent": "user", "user": "assistant"}
        return [{"role": "system", "content": system}] + [
            {"role": flipped[t.role], "content": t.text} for t in dialogue
        ]
    if prompt != "transcript":
        raise ValueError(f"unknown prompt format {prompt!r}; use one of {', '.join(PROMPTS)}")
    names = SPEAKERS.get(language, SPEAKERS["en"]) if isinstance(language, str) else SPEAKERS["en"]
    said = "\n".join(f"{names[t.role]}: {_quoted(t.text)}" for t in dialogue)
    reminder = REMINDER.get(language, REMINDER["en"])
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"<conversation>\n{said}\n</conversation>\n\n{reminder}"},
    ]


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
        prompt: str = "transcript",
    ) -> None:
        if prompt not in PROMPTS:
            raise ValueError(f"unknown prompt format {prompt!r}; use one of {', '.join(PROMPTS)}")
        self.name = base_url
        self.prompt = prompt
        self.model = model
        self.guidelines = guidelines
        self.temperature = float(temperature)  # 0 and 0.0 must give one fingerprint
        self.max_tokens = max_tokens
        hint = (
            f" (user_sim.timeout_s; a reply may be {2 * max_tokens} tokens, twice max_tokens when a cut one is asked "
            "for again: raise user_sim.timeout_s, or lower user_sim.max_tokens)"
        )
        self._endpoint = ChatEndpoint(
            base_url, model, SimulatorError, settings, ledger=Ledger("user"), timeout_hint=hint
        )
        self.ledger = self._endpoint.ledger

    def fingerprint(self) -> str:
        ident = [
            "openai",
            PROMPT_VERSION,
            self.name,
            self.model,
            self.temperature,
            self.max_tokens,
            self.prompt,
            self.guidelines.strip(),
        ]
        return hashlib.sha256(json.dumps(ident, ensure_ascii=False).encode()).hexdigest()

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        """The customer's next message; of ``progress`` only the waiting approval requests and the language are read
        (a model judges completion itself).

        The simulator is infrastructure, not the policy: a reply without text (empty, null, blank, only tool
        calls, whatever its finish reason) or with a lone surrogate (not text: no log could hold it) is retried
        like a server error, then :class:`SimulatorError`. Content parts are read as their joined text, as the
        agent's are. A reply cut at ``max_tokens`` (finish reason ``length``) is asked for once more with twice the
        tokens (one more request in the ledger); cut again, it is kept and marked (``progress.cut``), and the user
        review flags it (``cut_reply``).
        """
        messages = chat_messages(
            self.guidelines, task, dialogue, progress.requests, prompt=self.prompt, language=progress.language
        )
        response = self._complete(messages, self.max_tokens)
        if response.finish_reason == "length":
            response = self._complete(messages, 2 * self.max_tokens)
            progress.cut = response.finish_reason == "length"
        text = response.text.strip()
        if self.prompt == "transcript":  # the model may write its line as the transcript does: "Customer: ..."
            label = SPEAKERS.get(progress.language, SPEAKERS["en"])["user"]
            rest = text.removeprefix(label).lstrip()
            if rest != text and rest[:1] in (":", "：") and rest[1:].strip():  # a label alone stays: a reply
                text = rest[1:].lstrip()
        return text

    def _complete(self, messages: list[dict[str, str]], max_tokens: int) -> Completion:
        return self._endpoint.complete(messages, _usable, temperature=self.temperature, max_tokens=max_tokens)


def _usable(reply: Completion) -> str | None:
    """Why the customer's reply cannot be taken, or None."""
    return empty_reply(reply) or (f"the reply {NOT_TEXT}" if unencodable(reply.text) else None)
