"""JsonValid: is the answer a JSON object that satisfies the plan schema?"""

from __future__ import annotations

from rewardkit.rewards._base import CONTENT, JSON_ONLY, known_gaps, reward
from rewardkit.rewards._parsing import read_plans
from rewardkit.rewards._schema import AnswerSchema


def json_valid(completions: list[str], schema: AnswerSchema) -> list[float]:
    r"""1.0 iff the single answer block holds a JSON object valid under the schema.

    Formula: ``1[exactly one <answer>…</answer> after the think block, its text
    decodes to a JSON object, the object validates against the configured JSON
    Schema (``schema``: zh | en | path), and every step's depends_on points at
    earlier steps only]``. A plan that appears only inside ``<think>`` does not
    count; two or more answer blocks are invalid.
    Columns: none. Range: {0.0, 1.0}. Never returns None.

    Example::

        >>> from rewardkit.rewards import JsonValid
        >>> def done(answer):
        ...     return f"<think>\n周报属于数据分析专家。\n</think>\n\n<answer>\n{answer}\n</answer>"
        >>> plan = '{"补全后的问题": "查看经营周报", "plan": [{"专家": "数据分析专家", "处理问题": ["查看经营周报"]}]}'
        >>> later = plan.replace('"]}]', '"], "depends_on": [1]}]')  # step 0 depends on a step after it
        >>> JsonValid()([done(plan), done('{"plan": [}'), done(later)])  # valid; broken JSON; bad depends_on
        [1.0, 0.0, 0.0]
    """
    return [0.0 if plan is None else 1.0 for plan in read_plans(completions, schema)]


JsonValid = reward(
    json_valid, sets={"planner": 0.1, "planner_no_think": 0.1}, gameable=known_gaps(JSON_ONLY, *CONTENT), order=20
)
