"""Shared plumbing of the rewards: column checks; config and schema for the planning ones."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rewardkit.rewards._config import RewardConfig, load_config
from rewardkit.rewards._parsing import GoldError
from rewardkit.rewards._schema import AnswerSchema, load_schema

DATASET_FORMAT = (
    "GRPO rows need, next to 'messages': 'solution' (the gold answer as a JSON string in the "
    "configured schema) and 'experts' (the list of expert names offered in that row's prompt)"
)


class MissingColumnError(KeyError):
    """A reward needs a dataset column that the batch does not carry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class Reward:
    """Base of every rewardkit reward: checks the columns it reads, then scores.

    ms-swift builds each registered reward as ``cls(args=training_args)`` and
    calls it as ``reward(completions, **columns)``.
    """

    columns: ClassVar[tuple[str, ...]] = ()
    dataset_format: ClassVar[str] = ""  # how to build rows that carry the columns, for error messages

    def __init__(self, args: Any = None, **_: Any) -> None:
        self.args = args

    def __call__(self, completions: Sequence[str], **kwargs: Any) -> list[float | None]:
        texts = [c if isinstance(c, str) else str(c) for c in completions]
        for name in self.columns:
            if name not in kwargs:
                raise MissingColumnError(
                    f"{type(self).__name__}: dataset column {name!r} is missing. {self.dataset_format}."
                )
            if len(kwargs[name]) != len(texts):
                raise ValueError(f"column {name!r} has {len(kwargs[name])} values for {len(texts)} completions")
        return self.score(texts, kwargs)

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        raise NotImplementedError


class PlanningReward(Reward):
    """Base of the planning rewards; ``config`` overrides ``$REWARDKIT_CONFIG`` programmatically."""

    dataset_format = DATASET_FORMAT

    def __init__(self, args: Any = None, config: RewardConfig | Mapping[str, Any] | None = None, **_: Any) -> None:
        super().__init__(args)
        self.config = config if isinstance(config, RewardConfig) else load_config(config)
        self.schema: AnswerSchema = load_schema(self.config.schema, self.config.schema_keys)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(schema={self.schema.name!r})"


def expert_list(cell: Any) -> list[str]:
    """An ``experts`` cell as a list of names; JSON-encoded lists are accepted."""
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except ValueError as exc:
            raise GoldError(f"column 'experts' must be a list of names; got {cell[:80]!r}") from exc
    if not isinstance(cell, (list, tuple)) or not all(isinstance(x, str) for x in cell):
        raise GoldError(f"column 'experts' must be a list of names; got {cell!r:.80}")
    return list(cell)
