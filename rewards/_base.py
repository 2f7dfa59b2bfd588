"""Shared plumbing of the rewards: column checks; config and schema for the planning ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized
from typing import Any, ClassVar

from rewardkit.rewards._config import RewardConfig, load_config
from rewardkit.rewards._parsing import DatasetError, Plan
from rewardkit.rewards._rows import MISSING, planning_gold
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
    optional_columns: ClassVar[tuple[str, ...]] = ()  # read when the batch carries them
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
        for name in (*self.columns, *(c for c in self.optional_columns if kwargs.get(c) is not None)):
            size = len(kwargs[name]) if isinstance(kwargs[name], Sized) and not isinstance(kwargs[name], str) else None
            if size != len(texts):
                got = f"{size} values" if size is not None else f"a {type(kwargs[name]).__name__}"
                raise DatasetError(f"column {name!r} has {got} for {len(texts)} completions; it needs one per row")
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

    def golds(self, columns: Mapping[str, Any]) -> list[Plan | None]:
        """Every row's gold, validated (with its ``experts`` cell when the batch has that column) before any
        completion is read, so that a dataset bug fails the first batch whatever the model wrote."""
        solutions = columns["solution"]
        experts = columns.get("experts")
        experts = [MISSING] * len(solutions) if experts is None else experts
        threshold = self.config.fuzzy_threshold
        return [
            planning_gold(s, e, self.schema, threshold, i)
            for i, (s, e) in enumerate(zip(solutions, experts, strict=True))
        ]
