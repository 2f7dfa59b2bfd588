"""``reward()``: a plain function made the reward class ms-swift registers and TRL calls, declared by its signature."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
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


# What a trainer passes with each batch besides the completions: the dataset columns, and the trainer's state.
BATCH = {"solution": ["42", "42"], "bonus": [0.5, 0.0], "trainer_state": object()}


def readme_form(completions, solution, **kwargs):  # the README's own, unannotated
    return [1.0 if s in c else 0.0 for c, s in zip(completions, solution, strict=True)]


def takes_the_rest(completions: list[str], solution: list[str], **kwargs: Any) -> list[float]:
    return [float(s in c) + b for c, s, b in zip(completions, solution, kwargs["bonus"], strict=True)]


def counts_the_rest(completions: list[str], **columns: Any) -> list[float]:
    return [float(len(columns))] * len(completions)


def reads_the_state(completions: list[str], trainer_state: Any) -> list[float]:
    return [float(trainer_state is BATCH["trainer_state"])] * len(completions)


def keyword_column(completions: list[str], *, solution: list[str]) -> list[float]:
    return [float(s in c) for c, s in zip(completions, solution, strict=True)]


def star_args(completions: list[str], *args: Any) -> list[float]:
    return [0.0] * len(completions)


def star_rows(completions: list[str], *rows: Any, **kwargs: Any) -> list[float]:
    return [0.0] * len(completions)


def completions_second(solution: list[str], completions: list[str]) -> list[float]:
    return [0.0] * len(completions)


def trl_order(prompts: list[Any], completions: list[str], **kwargs: Any) -> list[float]:
    return [0.0] * len(completions)


def positional_column(completions: list[str], solution: list[str], /) -> list[float]:
    return [0.0] * len(completions)


def positional_completions(completions: list[str], /, solution: list[str]) -> list[float]:
    return [0.0] * len(completions)


def keyword_completions(*, completions: list[str]) -> list[float]:
    return [0.0] * len(completions)


def no_completions(label: list[str]) -> list[float]:
    return [0.0] * len(label)


def only_kwargs(**kwargs: Any) -> list[float]:
    return [0.0] * len(kwargs["completions"])


def unannotated_config(completions: list[str], config) -> list[float]:
    return [0.0] * len(completions)


def untyped_config(completions: list[str], config: dict) -> list[float]:
    return [0.0] * len(completions)


def unresolved(completions: list[str], config: NotImported) -> list[float]:  # type: ignore[name-defined]  # noqa: F821
    return [0.0] * len(completions)


def bad_schema(completions: list[str], schema: AnswerSchema) -> list[float]:
    return [0.0] * len(completions)


def trl_prompts(completions: list[str], prompts: list[Any]) -> list[float]:
    return [0.0] * len(completions)


def trl_token_ids(completions: list[str], completion_ids: list[list[int]]) -> list[float]:
    return [0.0] * len(completions)


def optional_prompts(completions: list[str], prompts: list[Any] | None = None) -> list[float]:
    return [float(s in c) for c, s in zip(completions, ["42", "42"], strict=True)]


async def awaited(completions: list[str]) -> list[float]:
    return [0.0] * len(completions)


def yielded(completions: list[str]) -> Iterator[float]:
    yield from [0.0] * len(completions)


# (function, keywords, its columns, its scores on ["42", "7"] with BATCH; or, refused, what the error names). "42" is
# in "42", not in "7".
SIGNATURES = [
    # **kwargs is no column: it gets the keywords no parameter names, as TRL's rewards do
    (readme_form, {}, ("solution",), [1.0, 0.0], None),
    (takes_the_rest, {}, ("solution",), [1.5, 0.0], None),  # + the bonus column, through **kwargs
    (counts_the_rest, {}, (), [3.0, 3.0], None),  # solution, bonus and trainer_state
    (keyword_column, {}, ("solution",), [1.0, 0.0], None),  # after `*`: still passed by keyword
    (reads_the_state, {}, (), [1.0, 1.0], None),  # the trainer's state, whole: no column of one value per row
    # nothing fills *args: both trainers pass the columns by keyword
    (star_args, {}, None, None, "`*args` gets nothing"),
    (star_rows, {}, None, None, "`*rows` gets nothing"),
    # ms-swift passes the completions first, by position
    (completions_second, {}, None, None, "`completions` comes after `solution`"),
    (trl_order, {}, None, None, "`completions` comes after `prompts`"),
    (keyword_completions, {}, None, None, "`completions` is keyword-only"),
    # TRL passes every argument by keyword
    (positional_column, {}, None, None, "`completions` and `solution` are positional-only"),
    (positional_completions, {}, None, None, "`completions` is positional-only"),
    (no_completions, {}, None, None, "takes the completions first"),
    (only_kwargs, {}, None, None, "takes the completions first"),
    # `config` is the reward's settings section, never a column
    (unannotated_config, {}, None, None, "`config` must be annotated with a @config_section class; got no annotation"),
    (untyped_config, {}, None, None, "must be annotated with a @config_section class; got <class 'dict'>"),
    (unresolved, {}, None, None, "an annotation cannot be resolved"),
    (bad_schema, {"base": Reward}, None, None, "only a planning reward"),
    # TRL passes `prompts` and `completion_ids`, ms-swift neither: under ms-swift a required one is a missing column
    (trl_prompts, {}, None, None, "`prompts` is passed by TRL alone"),
    (trl_token_ids, {}, None, None, "`completion_ids` is passed by TRL alone"),
    (optional_prompts, {}, (), [1.0, 0.0], None),  # with a default: TRL's when it passes them, else the default
    # the class's __call__ is not a coroutine function, so neither trainer awaits it: it would score a coroutine
    (awaited, {}, None, None, "is `async def`"),
    (yielded, {}, None, None, "is a generator function"),  # a generator's items are read once, by the first reader
]


@pytest.mark.parametrize(("function", "keywords", "columns", "scores", "fragment"), SIGNATURES)
def test_a_signature_is_callable_by_both_trainers_or_refused_naming_its_parameter(
    function: Any, keywords: dict, columns: tuple | None, scores: list | None, fragment: str | None
) -> None:
    if fragment is None:
        cls = reward(function, **keywords)
        assert cls.columns == columns
        assert cls()(["42", "7"], **BATCH) == scores  # ms-swift's call: the completions first, the rest by keyword
        assert cls()(completions=["42", "7"], **BATCH) == scores  # TRL's: every argument by keyword
        return
    with pytest.raises(RegistryError, match=re.escape(fragment)) as caught:
        reward(function, **keywords)
    assert f"{__name__}.{function.__name__}" in str(caught.value)


class Scorer:
    def __call__(self, completions: list[str]) -> list[float]:
        return [0.0] * len(completions)

    def method(self, completions: list[str], solution: list[str]) -> list[float]:
        return [float(s in c) for c, s in zip(completions, solution, strict=True)]


def _kept(function: Any) -> Any:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return wrapper


# (what reward() is given, its class's name; or, refused, what the error names). The class is named after the
# function and bound under that name, so what has no name of its own (a lambda, a partial, an instance) is refused.
CALLABLES = [
    (Scorer().method, "Method", None),  # a bound method: its signature without `self`
    (_kept(readme_form), "ReadmeForm", None),  # functools.wraps: the wrapped function's signature and name
    (lambda completions, solution: [0.0] * len(completions), None, "a lambda has no name"),
    (functools.partial(readme_form), None, "got a partial (functools.partial("),
    (Scorer(), None, "got a Scorer"),
]


@pytest.mark.parametrize(("function", "name", "fragment"), CALLABLES)
def test_what_has_no_function_name_is_refused_naming_what_it_got(
    function: Any, name: str | None, fragment: str | None
) -> None:
    if fragment is None:
        cls = reward(function)
        assert cls.__name__ == name
        assert cls()(["42", "7"], **BATCH) == cls()(completions=["42", "7"], **BATCH) == [1.0, 0.0]
        return
    with pytest.raises(RegistryError, match=re.escape(fragment)):
        reward(function)


def test_a_missing_column_of_a_function_reward_ends_in_one_full_stop() -> None:
    # a reward() class has no dataset_format to append: the message must not end in ". ."
    with pytest.raises(MissingColumnError) as caught:
        EchoLabel()([""])
    assert str(caught.value) == "EchoLabel: dataset column 'label' is missing."
