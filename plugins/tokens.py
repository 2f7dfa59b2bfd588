"""Exact sampled token ids in every turn, for ms-swift versions that re-tokenize history.

ms-swift >= 4.6 keeps each turn's sampled ids itself (``get_response_token_data``).
Older versions (4.4.x) re-encode earlier assistant turns from decoded text, so training
can see other ids than were sampled: BPE does not always round-trip, Qwen3's empty
``<think>\\n\\n</think>\\n\\n`` prefix sits in the rollout prompt but is injected only into
the last turn at training, and the sampled end-of-turn id is added again by the template.
:class:`ExactTurns` freezes each finished turn as ``{"token_ids", "loss_scale"}`` (which
the template encodes verbatim, also in the next turn's prompt) and puts the text back
before the trajectory is handed to the trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from swift.rollout.multi_turn import MultiTurnScheduler

# Capability, not version: the base class keeps sampled ids across turns by itself.
NATIVE_TOKEN_IDS = hasattr(MultiTurnScheduler, "get_response_token_data")


def end_of_turn_ids(tokenizer: Any) -> frozenset[int]:
    """Ids the template appends after an assistant message (Qwen: ``<|im_end|>``) or the tokenizer's eos."""
    ids = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
    return frozenset(i for i in ids if isinstance(i, int) and i != tokenizer.unk_token_id)


def response_prefix_ids(tokenizer: Any, enable_thinking: bool | None = None) -> list[int]:
    """Ids the rollout prompt ends with before sampling (Qwen3: an empty think block), as the trainer has them."""
    from swift.rlhf_trainers.utils import get_response_prefix_ids
    from swift.template import get_template

    template = get_template(tokenizer)
    return list(get_response_prefix_ids(template, sample_enable_thinking=enable_thinking) or [])


def strip_end(ids: Sequence[int], end_ids: frozenset[int]) -> list[int]:
    """Sampled ids without a trailing end-of-turn id, for templates that add it (with loss) themselves."""
    ids = list(ids)
    return ids[:-1] if ids and ids[-1] in end_ids else ids


def turn_before_a_tool(choice: Any, end_ids: frozenset[int]) -> dict[str, list[Any]]:
    """ms-swift >= 4.6, a turn that a tool response follows: its sampled ids without the end-of-turn id (the template
    closes such a turn with its own, which would otherwise be trained twice), with their loss mask and logprobs cut
    to the same length (else colocate mode drops the turn's logprobs and server mode refuses the mask)."""
    ids = strip_end(choice.token_ids or [], end_ids)
    out: dict[str, list[Any]] = {"response_token_ids": ids, "response_loss_mask": [1] * len(ids)}
    logprobs = MultiTurnScheduler._extract_logprobs_from_choice(choice)
    if logprobs:
        out["rollout_logprobs"] = logprobs[: len(ids)]
    return out


class ExactTurns:
    """Per trajectory: the assistant messages frozen to ids, and their text to restore."""

    def __init__(self, prefix: Sequence[int], end_ids: frozenset[int]) -> None:
        self.prefix = list(prefix)
        self.end_ids = end_ids
        self.frozen: list[tuple[dict[str, Any], str]] = []

    def freeze(self, messages: list[dict[str, Any]], sampled: Sequence[int]) -> tuple[list[int], list[int]]:
        """Freeze the last assistant message to ``prefix + sampled`` ids; return (ids, loss mask)."""
        ids = self.prefix + strip_end(sampled, self.end_ids)
        mask = [0] * len(self.prefix) + [1] * (len(ids) - len(self.prefix))
        message = next(m for m in reversed(messages) if m.get("role") == "assistant")
        self.frozen.append((message, message["content"]))
        message["content"] = {"token_ids": ids, "loss_scale": mask}
        return ids, mask

    def restore(self) -> None:
        """Text back into every frozen message: ms-swift's RolloutOutput accepts only string content."""
        for message, text in self.frozen:
            message["content"] = text
        self.frozen.clear()
