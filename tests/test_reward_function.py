"""``reward()``: a plain function made the reward class ms-swift registers and TRL calls, declared by its signature."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from rewardkit.config import config_section, setting
from rewardkit.rewards import MissingColumnError, PlanningReward, Reward, reward
from rewardkit.rewards._found import RegistryError
from rewardkit.rewards._schema import AnswerSchema


@config_section("shortness")
@dataclass(frozen=True)
class ShortnessConfig:
    """How long is short."""

    limit: int = setting(4, "Characters at full score.", minimum=1)


def shortness(completions: list[str], config: ShortnessConfig) -> list[float]:
    """1 up to ``limit`` characters, else 0."""
    return [float(len(c) <= config.limit) for c in completions]


def echo_label(
    completions: list[str], label: Sequence[str], weight: Sequence[float] | None = None
) -> list[float | None]:
    """The row's weight when its label is "yes", None when it is "skip", else 0."""
    weights = weight or [1.0] * len(completions)
    return [None if lab == "skip" else float(lab == "yes") * w for lab, w in zip(label, weights, strict=True)]


def schema_name(completions: list[str], schema: AnswerSchema) -> list[float]:
    """1 when the configured schema is the English one."""
    return [float(schema.name == "en")] * len(completions)


Shortness = reward(shortness, sets={"planner": 0.0}, order=90)
EchoLabel = reward(echo_label, range=(0.0, 2.0))
SchemaName = reward(schema_name)

# What each class declares, read off its function: (class, columns, optional columns, may return None, section, base)
DECLARED = [
    (Shortness, (), (), False, ShortnessConfig, Reward),  # list[float]: never None; `config` is the section
    (EchoLabel, ("label",), ("weight",), True, None, Reward),  # a default makes a column optional
    (SchemaName, (), (), False, None, PlanningReward),  # `schema` makes it a planning reward
]


@pytest.mark.parametrize(("cls", "columns", "optional", "none", "section", "base"), DECLARED)
def test_the_signature_is_the_declaration(
    cls: type[Reward], columns: tuple, optional: tuple, none: bool, section: type | None, base: type
) -> None:
    assert (cls.columns, cls.optional_columns, cls.may_return_none, cls.section) == (columns, optional, none, section)
    assert issubclass(cls, base) and cls.__module__ == __name__ and cls.__doc__ == cls.function.__doc__


def test_the_name_and_keywords_come_from_the_function_and_reward() -> None:
    assert (Shortness.__name__, Shortness().__name__) == ("Shortness", "Shortness")  # as ms-swift and TRL log it
    assert (dict(Shortness.sets), Shortness.order, EchoLabel.range) == ({"planner": 0.0}, 90, (0.0, 2.0))
    assert (dict(EchoLabel.sets), EchoLabel.order, Shortness.range) == ({}, 1000, (0.0, 1.0))  # the defaults


# (class, built with, completions, columns, scores)
SCORED = [
    (Shortness, {}, ["abcd", "abcde"], {}, [1.0, 0.0]),  # limit 4 by default: 4 <= 4, 5 > 4
    (Shortness, {"config": {"shortness": {"limit": 5}}}, ["abcde"], {}, [1.0]),  # the config= section
    (EchoLabel, {}, ["", "", ""], {"label": ["yes", "no", "skip"]}, [1.0, 0.0, None]),  # weight left at its default
    (EchoLabel, {}, ["", ""], {"label": ["yes", "yes"], "weight": [2.0, 0.5]}, [2.0, 0.5]),
    (EchoLabel, {}, [""], {"label": ["yes"], "weight": None, "other": [1]}, [1.0]),  # None and unknown columns
    (SchemaName, {"config": {"schema": "en"}}, ["x"], {}, [1.0]),
    (SchemaName, {}, ["x"], {}, [0.0]),  # zh by default
]


@pytest.mark.parametrize(("cls", "built", "completions", "columns", "scores"), SCORED)
def test_the_class_passes_the_function_what_it_names(
    cls: type[Reward], built: dict[str, Any], completions: list[str], columns: dict[str, Any], scores: list
) -> None:
    assert cls(**built)(completions, **columns) == scores


def test_trl_conversational_completions_reach_the_function_as_text() -> None:
    turns = [[{"role": "assistant", "content": "abc"}], [{"role": "assistant", "content": "abcdefg"}]]
    assert Shortness()(turns) == [1.0, 0.0]  # 3 and 7 characters against 4


def test_a_missing_column_and_an_unknown_keyword_fail_naming_them() -> None:
    with pytest.raises(MissingColumnError, match="'label' is missing"):
        EchoLabel()([""])
    with pytest.raises(TypeError, match="'confg'"):
        Shortness(confg={})


def no_completions(label: list[str]) -> list[float]:
    return [0.0] * len(label)


def untyped_config(completions: list[str], config: dict) -> list[float]:
    return [0.0] * len(completions)


def unresolved(completions: list[str], config: NotImported) -> list[float]:  # type: ignore[name-defined]  # noqa: F821
    return [0.0] * len(completions)


def bad_schema(completions: list[str], schema: AnswerSchema) -> list[float]:
    return [0.0] * len(completions)


# (function, keywords, what the error names)
REFUSED = [
    (no_completions, {}, "takes the completions first"),
    (untyped_config, {}, "must be annotated with a @config_section class"),
    (unresolved, {}, "an annotation cannot be resolved"),
    (bad_schema, {"base": Reward}, "only a planning reward"),
]


@pytest.mark.parametrize(("function", "keywords", "fragment"), REFUSED)
def test_a_function_it_cannot_declare_is_refused_naming_it(function: Any, keywords: dict, fragment: str) -> None:
    with pytest.raises(RegistryError, match=fragment) as caught:
        reward(function, **keywords)
    assert f"{__name__}.{function.__name__}" in str(caught.value)
