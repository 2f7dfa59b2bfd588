"""Shared plumbing of the rewards: completions as text, column checks, the declaration every reward makes; config
and schema for the planning ones; and :func:`reward`, which makes a reward class of a plain function."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping, Sized
from types import MappingProxyType, NoneType
from typing import Any, ClassVar

from rewardkit.errors import UserError
from rewardkit.rewards._found import RegistryError, class_name
from rewardkit.rewards._parsing import DatasetError
from rewardkit.rewards._rows import PlanningRows, planning_rows
from rewardkit.rewards._schema import AnswerSchema, load_schema
from rewardkit.rewards.config import ExpertMatchConfig, RewardConfig, load_config, load_section

# Completions as text, whichever trainer passes them.
#
# ms-swift passes each completion as a string. TRL's ``GRPOTrainer`` on a
# conversational dataset passes a list of messages, e.g.
# ``[{"role": "assistant", "content": "..."}]`` (after tool calls, the assistant,
# tool and again assistant turns). A reward reads the text of the last assistant
# message. Before, ``str(list)`` was scored and every such completion got 0.0
# silently, so any other shape now raises instead of being guessed at.
SHAPES = "pass a string or TRL's conversational list of messages"


class CompletionShapeError(TypeError):
    """A completion is neither a string nor a list of chat messages (a trainer or pipeline bug)."""


def _a(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _shape(value: Any) -> str:
    """The shape in words, for error messages: "a dict", "a list of int", "an empty list"."""
    if value is None:
        return "None"
    name = type(value).__name__
    if isinstance(value, (list, tuple)):
        inner = " and ".join(sorted({type(v).__name__ for v in value}))
        return f"{_a(name)} of {inner}" if inner else f"an empty {name}"
    return _a(name)


def _content_text(content: Any, i: int) -> str:
    if isinstance(content, str):
        return content
    if content is None:  # an assistant turn with tool calls only: it said nothing
        return ""
    if isinstance(content, (list, tuple)):
        parts: list[str] = []
        for part in content:
            if not isinstance(part, Mapping):
                break
            if part.get("type") == "text":
                if not isinstance(part.get("text"), str):
                    break
                parts.append(part["text"])
            # other parts (images, audio) carry no text to score
        else:
            return "".join(parts)
    raise CompletionShapeError(
        f"completion {i}: the last assistant message's content is {_shape(content)}; "
        "it must be a string or a list of {'type': 'text', 'text': ...} parts"
    )


def is_conversational(completion: Any) -> bool:
    """A non-empty list of message dicts, as TRL passes for a conversational dataset."""
    return (
        isinstance(completion, (list, tuple))
        and bool(completion)
        and all(isinstance(m, Mapping) and "role" in m for m in completion)
    )


def completion_text(completion: Any, i: int) -> str:
    """The text a reward scores: the string itself, or the last assistant message's content."""
    if isinstance(completion, str):
        return completion
    if is_conversational(completion):
        for message in reversed(completion):
            if message["role"] == "assistant":
                return _content_text(message.get("content"), i)
        raise CompletionShapeError(f"completion {i} is a list of messages without an assistant message; {SHAPES}")
    raise CompletionShapeError(f"completion {i} is {_shape(completion)}; {SHAPES}")


def completion_texts(completions: Iterable[Any], strict: bool = True) -> list[str]:
    """Every completion's text. ``strict=False`` is for rewards that never read the text: an unknown
    shape becomes its ``str()`` as before (ms-swift >= 4.6 may pass a multi-turn turn as token ids)."""
    if isinstance(completions, (str, bytes, Mapping)) or not isinstance(completions, Iterable):
        raise CompletionShapeError(f"completions must be a list with one per row; got {_shape(completions)}")
    texts = list(completions)
    if all(type(t) is str for t in texts):  # as ms-swift passes them: nothing to read out
        return texts
    return [_text(c, i, strict) for i, c in enumerate(texts)]


def _text(completion: Any, i: int, strict: bool) -> str:
    try:
        return completion_text(completion, i)
    except CompletionShapeError:
        if strict:
            raise
        return str(completion)


DATASET_FORMAT = (
    "GRPO rows need, next to 'messages': 'solution' (the gold answer as a JSON string in the "
    "configured schema) and 'experts' (the list of expert names offered in that row's prompt)"
)


# Why a reward may score a gaming probe of rewardkit.testing like the gold (see ``Reward.gameable``).
FORMAT_ONLY = "a format reward: it scores the layout alone; JsonValid and the content rewards of its set score the rest"
THINK_ONLY = "it reads the first think block alone; JsonValid and the content rewards of its set score the answer"
JSON_ONLY = (
    "it checks that the answer is one schema-valid JSON object, not what it plans; the content rewards score that"
)
# The content probes of rewardkit.testing on a planning answer: well-formed answers that say the wrong thing. The
# kit refuses a ``gameable`` name that is not one of its probes, so a renamed probe fails the contract test.
CONTENT = ("other_gold", "constant", "swapped_expert", "exchanged_experts", "dropped_step", "unrewritten")


def known_gaps(reason: str, *probes: str, also: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """A read-only ``gameable`` declaration: each probe name (or ``"*"``, every probe) -> ``reason``, and the
    probes of ``also`` (another declaration, for a second reason)."""
    return MappingProxyType({**dict.fromkeys(probes, reason), **(also or {})})


# What a layout reward (StrictFormat, AnswerFormat) knowingly lets through: well-formed answers that say nothing or
# the wrong thing.
FORMAT_GAPS = known_gaps(FORMAT_ONLY, "tags_only", "repeated", *CONTENT)


class MissingColumnError(UserError, KeyError):
    """A reward needs a dataset column that the batch does not carry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


# What ms-swift passes when it builds a reward from ``orms``: ``orms[key](args=training_args)`` or
# ``orms[key]()`` (swift/rlhf_trainers/grpo_trainer.py and utils.resolve_reward_funcs, 4.4 and 4.6).
SWIFT_KEYWORDS = ("args",)
_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class Reward:
    """Base of every rewardkit reward: checks the columns it reads, then scores.

    ms-swift builds each registered reward as ``cls(args=training_args)`` and
    calls it as ``reward(completions, **columns)`` with string completions; TRL's
    ``GRPOTrainer`` takes instances and passes conversational completions as
    lists of messages, scored on the last assistant message's text.
    """

    columns: ClassVar[tuple[str, ...]] = ()
    optional_columns: ClassVar[tuple[str, ...]] = ()  # read when the batch carries them
    dataset_format: ClassVar[str] = ""  # how to build rows that carry the columns, for error messages
    # Whether score() reads the completions' text. Those that do raise on a completion shape they cannot
    # read; the others (the agent ones read 'messages') keep any shape, as they only count completions.
    reads_completions: ClassVar[bool] = False
    # What the reward promises, read by rewardkit.testing (docs/testing.md): scores in ``range``, None only when
    # ``may_return_none``; ``gameable`` names the gaming probes it knowingly scores like the gold, and why.
    range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    may_return_none: ClassVar[bool] = True
    gameable: ClassVar[Mapping[str, str]] = MappingProxyType({})
    # Where it is registered and listed (rewardkit.rewards.registry): its ``<key>:`` settings section (declared in
    # its own file), its place in lists (the registry, a set's ``reward_funcs``; ties go by key) and the recipe sets
    # it joins, set name -> its weight there (0: logged, not trained on).
    section: ClassVar[type | None] = None
    order: ClassVar[int] = 1000
    sets: ClassVar[Mapping[str, float]] = MappingProxyType({})

    def __new__(cls, *args: Any, **kwargs: Any) -> Reward:
        # Checked here, not in __init__: a subclass __init__ may swallow **kwargs without passing them up.
        # A typo (confg=) would otherwise silently build a reward with the default config.
        accepted = cls.accepted_keywords()
        unknown = [k for k in kwargs if k not in accepted]
        if unknown:
            raise TypeError(
                f"{cls.__name__}() got unknown keyword argument(s) {', '.join(map(repr, unknown))}; "
                f"it accepts: {', '.join(accepted)}"
            )
        return super().__new__(cls)  # pickle calls cls.__new__(cls) without arguments: nothing to check

    @classmethod
    def accepted_keywords(cls) -> tuple[str, ...]:
        """The constructor keywords: ms-swift's, plus those every ``__init__`` on the MRO names."""
        names = dict.fromkeys(SWIFT_KEYWORDS)
        for klass in reversed(cls.__mro__):
            init = klass.__dict__.get("__init__")
            if init is not None and klass is not object:
                params = list(inspect.signature(init).parameters.values())[1:]  # without self
                names.update(dict.fromkeys(p.name for p in params if p.kind in _NAMED))
        return tuple(names)

    def __init__(self, args: Any = None) -> None:
        # ``args``: ms-swift's training arguments, passed to every reward; only ThinkLength reads them (args.model).
        pass

    @property
    def __name__(self) -> str:
        """The name loggers use (TRL reads ``reward_func.__name__``): the class name, as ms-swift logs it."""
        return type(self).__name__

    def __call__(self, completions: Iterable[Any], **kwargs: Any) -> list[float | None]:
        texts = completion_texts(completions, strict=self.reads_completions)
        for name in self.columns:
            if name not in kwargs:
                raise MissingColumnError(
                    f"{type(self).__name__}: dataset column {name!r} is missing."
                    + (f" {self.dataset_format}." if self.dataset_format else "")
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
    reads_completions = True

    def __init__(self, args: Any = None, config: RewardConfig | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        own = () if type(self).section is None else (type(self).section,)
        sections = (ExpertMatchConfig, *own)  # every planning reward checks its gold's experts
        self.config = config if isinstance(config, RewardConfig) else load_config(config, sections=sections)
        self.schema: AnswerSchema = load_schema(self.config.schema, self.config.schema_keys)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(schema={self.schema.name!r})"

    def rows(self, columns: Mapping[str, Any]) -> PlanningRows:
        """Every row's gold, validated (with its ``experts`` cell when the batch has that column) before any
        completion is read, so that a dataset bug fails the first batch whatever the model wrote; and its experts
        list indexed. Shared by the rewards of a batch: never change it."""
        threshold = self.config.section(ExpertMatchConfig).fuzzy_threshold  # the one expert-name rule
        return planning_rows(columns["solution"], columns.get("experts"), self.schema, threshold)


# The parameters of a reward function that are not dataset columns: what the reward itself hands it, and what both
# trainers pass whole with every batch (a ``transformers.TrainerState``, not one value per row).
COMPLETIONS, SETTINGS, SCHEMA, STATE = "completions", "config", "schema", "trainer_state"
# What TRL passes with every batch and ms-swift does not (``reward(prompts=..., completions=..., completion_ids=...)``):
# optional parameters, never required columns.
TRL_ONLY = ("prompts", "completion_ids")


def reward(
    function: Callable[..., list[float | None]] | Callable[..., list[float]],
    *,
    sets: Mapping[str, float] | None = None,
    gameable: Mapping[str, str] | None = None,
    range: tuple[float, float] = (0.0, 1.0),
    reads_completions: bool = True,
    order: int = 1000,
    base: type[Reward] | None = None,
) -> type[Reward]:
    """The reward class of a plain function: what ms-swift's ``orms`` registers, and whose instances TRL calls.

    The function's signature is the declaration. ``completions``, the first parameter, gets the completions' text;
    every other parameter is a dataset column of that name, passed as one value per row: required without a default,
    optional with one (left at its default when the batch lacks it or passes None); ``trainer_state`` gets the
    trainer's state, as ms-swift and TRL pass it with every batch; ``**kwargs`` gets every other keyword the trainer
    passes (the remaining columns), as TRL's rewards take them. Two names are the reward's own: ``config``, whose
    annotation is a ``@config_section`` class, gets that section of the reward's config (``$REWARDKIT_CONFIG``, or
    the ``config=`` the class is built with); ``schema`` gets a planning reward's answer schema. A signature that a
    trainer cannot call (``*args``, a positional-only parameter, ``completions`` not first, ``prompts`` or
    ``completion_ids`` without a default: TRL alone passes them) is refused here, naming the parameter; so is what
    is no named, plain ``def`` (a lambda, a ``functools.partial``, an ``async def``, a generator function). A return
    annotation without None (``list[float]``) promises never to return None. The class is
    named after the function in CamelCase and takes its docstring; bind it under that name in the function's
    module::

        def answer_length(completions: list[str]) -> list[float]:
            ...

        AnswerLength = reward(answer_length, sets={"planner": 0.0})

    The keywords are the rest of :class:`Reward`'s declaration, each with its default: the ``sets`` it joins (set
    name -> weight), the probes it is knowingly ``gameable`` by, its ``range``, its ``order`` in lists, whether it
    ``reads_completions`` (False: any completion shape is accepted, only counted), and its ``base``
    (:class:`PlanningReward` for a reward of a planning answer against its gold).
    """
    where = _named(function)
    params = inspect.signature(function).parameters
    base = base or (PlanningReward if SCHEMA in params else Reward)
    try:
        hints = typing.get_type_hints(function)
    except NameError as exc:
        raise RegistryError(f"{where}: an annotation cannot be resolved ({exc}); import what it names") from exc
    _callable(where, params)
    section = hints.get(SETTINGS) if SETTINGS in params else None
    if SETTINGS in params and not getattr(section, "SECTION", None):
        got = "no annotation" if section is None else repr(section)
        raise RegistryError(
            f"{where}: `config` must be annotated with a @config_section class; got {got} (`config` is the "
            "reward's own settings, never a dataset column: annotate it, or rename the column's parameter)"
        )
    if SCHEMA in params and not issubclass(base, PlanningReward):
        raise RegistryError(f"{where}: only a planning reward (base=PlanningReward) has a `schema` to pass")
    cells = [p for n, p in params.items() if n not in (COMPLETIONS, SETTINGS, SCHEMA, STATE) and p.kind in _NAMED]
    rest = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    returns = typing.get_args(hints.get("return", list[float | None]))
    score_type = returns[0] if returns else float | None

    def score(self: Reward, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        given = {p.name: columns[p.name] for p in cells if columns.get(p.name) is not None}
        if STATE in params and STATE in columns:
            given[STATE] = columns[STATE]
        if rest:  # **kwargs: what no parameter names, as the trainer passed it
            given.update((name, value) for name, value in columns.items() if name not in params)
        if section is not None:
            given[SETTINGS] = self.settings
        if SCHEMA in params:
            given[SCHEMA] = self.schema
        return function(completions, **given)

    namespace: dict[str, Any] = {
        "__module__": function.__module__,
        "__qualname__": class_name(function.__name__),
        "__doc__": function.__doc__,
        "function": staticmethod(function),
        "score": score,
        "columns": tuple(p.name for p in cells if p.default is p.empty),
        "optional_columns": tuple(p.name for p in cells if p.default is not p.empty),
        "may_return_none": NoneType in typing.get_args(score_type),
        "reads_completions": reads_completions,
        "range": range,
        "order": order,
        "sets": MappingProxyType(dict(sets or {})),
        "gameable": MappingProxyType(dict(gameable or {})),
        "section": section,
    }
    if section is not None:
        namespace["__init__"] = _settings_init(base, section)
    return type(class_name(function.__name__), (base,), namespace)


def _named(function: Any) -> str:
    """Where the function is defined (``module.qualname``), for messages; refuse what cannot be a reward class: the
    class is named after a ``def`` and bound under that name, and both trainers call it and read a list back."""
    if not (inspect.isfunction(function) or inspect.ismethod(function)):
        raise RegistryError(
            f"reward() takes a function defined with `def`; got {_a(type(function).__name__)} ({function!r}): "
            "define a function that calls it, and pass that"
        )
    where = f"{function.__module__}.{function.__qualname__}"
    if function.__name__ == "<lambda>":
        raise RegistryError(f"{where}: a lambda has no name for its reward class; define it with `def`")
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        raise RegistryError(
            f"{where} is `async def`, but the reward class's call is not awaited by either trainer; make it a `def`"
        )
    if inspect.isgeneratorfunction(function):
        raise RegistryError(f"{where} is a generator function (it yields); return the list of scores instead")
    return where


def _callable(where: str, params: Mapping[str, inspect.Parameter]) -> None:
    """Refuse a signature the trainers cannot call, naming the parameter. ms-swift calls a reward as
    ``reward(completions, **columns)``, TRL as ``reward(prompts=..., completions=..., completion_ids=..., **columns)``:
    the completions come first or by keyword, everything else by keyword."""
    positional = [f"`{name}`" for name, p in params.items() if p.kind is inspect.Parameter.POSITIONAL_ONLY]
    if positional:
        are = "is" if len(positional) == 1 else "are"
        raise RegistryError(
            f"{where}: {' and '.join(positional)} {are} positional-only (before `/`), but TRL passes every argument "
            "by keyword; remove the `/`"
        )
    for i, p in enumerate(params.values()):
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            raise RegistryError(
                f"{where}: `*{p.name}` gets nothing: the trainers pass every column by keyword; name each column "
                "you read as a parameter, or take the rest with `**kwargs`"
            )
        if p.name == COMPLETIONS and i > 0:
            raise RegistryError(
                f"{where}: `completions` comes after `{next(iter(params))}`, but ms-swift passes the completions "
                "first, by position; make `completions` the first parameter"
            )
        if p.name == COMPLETIONS and p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            raise RegistryError(
                f"{where}: `completions` is keyword-only (after `*`), but ms-swift passes the completions first, by "
                "position; make it the first parameter, before any `*`"
            )
    if COMPLETIONS not in params:
        raise RegistryError(f"{where}: a reward function takes the completions first, as `completions: list[str]`")
    for p in params.values():
        if p.name in TRL_ONLY and p.default is p.empty:
            raise RegistryError(
                f"{where}: `{p.name}` is passed by TRL alone (ms-swift passes the completions and the dataset "
                f"columns); give it a default (`{p.name}=None`) to read it when TRL passes it"
            )


def _settings_init(base: type[Reward], section: type) -> Callable[..., None]:
    """An ``__init__`` that loads the function's ``config`` section (into ``self.settings``)."""
    if issubclass(base, PlanningReward):

        def planning_init(self: PlanningReward, args: Any = None, config: Any = None) -> None:
            PlanningReward.__init__(self, args, config)
            self.settings = self.config.section(section)

        return planning_init

    def init(self: Reward, args: Any = None, config: Any = None) -> None:
        Reward.__init__(self, args)
        self.settings = load_section(section, config)

    return init
