"""The planning answer format, public: parse a completion, pick a schema, read the plan.

A planning completion is a think block followed by one JSON answer::

    <think>
    …reasoning…
    </think>

    <answer>
    {"补全后的问题": "查看经营周报", "plan": [{"专家": "数据分析专家", "处理问题": ["查看经营周报"]}]}
    </answer>

The planning rewards, the data builders and the training summary all read
completions through the functions below, so they agree on what an answer is.
Import them from here; the ``_``-prefixed modules they live in are internal and
may change.

- :func:`parse` splits a completion into its think text and its answer object
  (:class:`Completion`; either part is None when absent or malformed). It never raises.
- :func:`load_schema` returns an :class:`AnswerSchema`: the preset ``"zh"`` (the
  keys above) or ``"en"`` (``rewritten_query``/``plan``/``expert``/``tasks``), or a
  JSON Schema file plus the names of those four fields.
- :func:`read_plan` is the answer as a :class:`Plan` (the rewritten query and its
  :class:`Step` s) when it validates against the schema and every ``depends_on``
  points at an earlier step; None otherwise. :func:`read_gold` reads a dataset
  row's ``solution`` cell the same way, but raises :class:`GoldError` on bad data.
- :func:`normalize_name` is how expert names compare: NFKC, no whitespace or
  zero-width characters, casefolded.

``parse`` and ``read_plan`` are cached per completion string, and ``load_schema``
per spec, so calling them from several places costs one parse.

Example::

    >>> schema = load_schema("en")
    >>> text = '<think>\\nweekly report\\n</think>\\n\\n<answer>\\n' \\
    ...     '{"rewritten_query": "show the weekly report", "plan": [{"expert": "Data", "tasks": ["report"]}]}' \\
    ...     '\\n</answer>'
    >>> parse(text).think
    'weekly report'
    >>> [step.expert for step in read_plan(text, schema).steps]
    ['Data']
    >>> read_plan("<answer>{}</answer>", schema) is None
    True
"""

from __future__ import annotations

from rewardkit.rewards._parsing import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    Completion,
    GoldError,
    Plan,
    Step,
    parse,
    read_gold,
    read_plan,
)
from rewardkit.rewards._schema import AnswerSchema, load_schema
from rewardkit.rewards._text import ExpertIndex, normalize_name

__all__ = [
    "ANSWER_CLOSE",
    "ANSWER_OPEN",
    "THINK_CLOSE",
    "THINK_OPEN",
    "AnswerSchema",
    "Completion",
    "ExpertIndex",
    "GoldError",
    "Plan",
    "Step",
    "load_schema",
    "normalize_name",
    "parse",
    "read_gold",
    "read_plan",
]
