"""tau2-grpo: a domain's tasks in tau2-bench's format → ms-swift GRPO rows for tool-use rollouts.

Output row (one per task of the split, in split order)::

    {"messages": [{"role": "system", "content": "<the domain's policy.md>"},
                  {"role": "user", "content": "I am Yusuf Rossi in zip code 19122. I received my order #W2378156 …"}],
     "tools": "[{\\"type\\": \\"function\\", …}]",   # JSON string of the domain's OpenAI specs
     "task": "{\\"id\\": \\"0\\", …}",                # the tau2 task, JSON string
     "domain": "retail"}                               # --domain; a domain's path is written absolute

``tools`` and ``task`` are strings because HF datasets (Arrow) would otherwise
merge the nested schemas of all rows, padding every dict with the union of keys.

The user turn is the scenario's ``known_info`` then ``reason_for_call``, moved
from tau2's second person ("You are …", addressed to a user simulator) into the
customer's first person. Sentences that only steer a simulator (secrets not to
share, "if the agent asks …" reactions, conversational tactics) are dropped, as
are ``unknown_info`` and ``task_instructions``: a single opening turn cannot act
them out, and showing them to the policy would leak what the customer withholds.

Rejected: ``missing_task`` (split names an id the tasks file lacks), ``duplicate_in_split``
(the split names an id a second time: one row per task), ``no_evaluation_criteria``,
``no_reason_for_call``, and the malformed tasks listed in ``tau2_tasks`` (``bad_task``,
``duplicate_task_id``, ``bad_evaluation_criteria``, ``bad_gold_arguments``, ``gold_fails``,
``no_evidence``, ``tool_sim_error``, ``bad_user_scenario``).
"""

from __future__ import annotations

import json
from typing import Any

from rewardkit.data_builders._io import BuildReport, Record
from rewardkit.data_builders.tau2_tasks import Tau2Options, load_sources, task_problem
from rewardkit.envs import portable_ref
from rewardkit.envs.scenario import opening_turn
from rewardkit.envs.task_verdict import gold_outcome
from rewardkit.envs.tasks import instructions, scripted_actions

# --- building ---------------------------------------------------------------------

# The user turn of a --multi-turn row. The simulated_user scheduler replaces it with the user
# simulator's opening at rollout time; without the scheduler the row says so to the reader.
MULTI_TURN_PLACEHOLDER = "[the user simulator writes this turn at rollout time: --multi_turn_scheduler simulated_user]"


def _asks_the_user(domain: str, task: Any) -> bool:
    """Whether the task's right outcome needs the user's answer to an approval request: a gold write held until
    approved, or a ``declined`` entry (a single completion has no user turn to answer in)."""
    declined = any(a.get("outcome") == "declined" for a in scripted_actions(task))
    return declined or bool(gold_outcome(domain, task).approvals)


def build_tau2_grpo(opts: Tau2Options) -> tuple[list[dict[str, Any]], BuildReport]:
    src = load_sources(opts)
    tools_json = json.dumps(src.tools, ensure_ascii=False)
    domain = portable_ref(opts.domain)  # every process reads the rows' domain cell alike, whatever its cwd
    report = BuildReport()
    # Tasks-file items no split can name are counted too: nothing in an input goes unaccounted for.
    for source, item, reason, detail in src.unusable:
        report.read += 1
        report.reject(source, reason, detail, raw=item)
    rows: list[dict[str, Any]] = []
    first_at: dict[str, int] = {}
    for at, task_id in enumerate(src.ids):
        report.read += 1
        source = f"{opts.domain}/{opts.split}/task {task_id}"
        if task_id in first_at:
            detail = f"the split lists task id {task_id!r} again (item {at}; first at item {first_at[task_id]})"
            report.reject(source, "duplicate_in_split", detail)
            continue
        first_at[task_id] = at
        task = src.by_id.get(task_id)
        if task is None:
            report.reject(source, "missing_task", "the split names it but the tasks file has no such id")
            continue
        problem = task_problem(task, src.domain)
        opening = ""
        if problem is None:
            opening = MULTI_TURN_PLACEHOLDER if opts.multi_turn else opening_turn(instructions(task))
        if problem is None and not opening:
            problem = (
                "no_reason_for_call",
                "nothing is left of the request once the sentences meant only for a user simulator are dropped",
            )
        if problem is None and not opts.multi_turn and _asks_the_user(src.domain.name, task):
            problem = (
                "needs_approval",
                "its gold write waits for the user's approval, or the user declines a write it proposes, which only "
                "a conversation gives: build it with --multi-turn",
            )
        if problem:
            report.reject(Record(source, task), *problem)
            continue
        rows.append(
            {
                "messages": [
                    {"role": "system", "content": src.policy},
                    {"role": "user", "content": opening},
                ],
                "tools": tools_json,
                "task": json.dumps(task, ensure_ascii=False),
                "domain": domain,
            }
        )
        report.written += 1
    report.check()
    return rows, report
