"""tau2-grpo inputs: the tasks, split and policy files, and the check of each task.

A file that cannot be used at all (missing, not JSON, the wrong top-level shape, an
unknown split) raises BuildError. A single task that cannot be used is a counted
reject: a tasks-file item that is not an object with a string or integer ``id``
(``bad_task``, so it can never be named by a split), a repeated id
(``duplicate_task_id``), and, for the tasks a split names, an
``evaluation_criteria`` that the rewards could not read (``bad_evaluation_criteria``),
gold arguments that the tool's schema refuses (``bad_gold_arguments``), instructions of the
wrong type (``bad_user_scenario``), and every reason of the task's verdict
(:mod:`rewardkit.envs.task_verdict`: ``gold_fails``, ``bad_outcome_entry``, ``no_change``,
``no_evidence``, ``tool_sim_error``, ``env_error``, ``gold_raises``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewardkit.data_builders._io import SURROGATE, BuildError
from rewardkit.envs import tasks
from rewardkit.envs.task_verdict import task_verdict
from rewardkit.files.jsonl import encodable, json_problem, kind

if TYPE_CHECKING:
    from rewardkit.envs.domain import Domain


@dataclass(frozen=True)
class Tau2Options:
    domain: str  # a built-in name, an entry point or a domain's path (the rows record a path made absolute)
    split: str = "train"
    tasks_file: Path | None = None  # default: the domain's vendored tasks.json
    split_file: Path | None = None  # default: its split_tasks.json
    policy_file: Path | None = None  # default: its policy.md
    multi_turn: bool = False  # rows for the simulated_user scheduler (see MULTI_TURN_PLACEHOLDER)


@dataclass
class Sources:
    by_id: dict[str, Any]  # task id -> task object
    ids: list[str]  # the split's task ids, in order
    policy: str
    tools: list[dict[str, Any]]  # the domain's OpenAI specs
    domain: Domain
    unusable: list[tuple[str, Any, str, str]] = field(default_factory=list)  # (source, item, reason, detail)


def _read_json(path: Path, what: str) -> Any:
    try:
        text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except FileNotFoundError:
        raise BuildError(f"{what} {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BuildError(f"{what} {path} is not readable UTF-8 text: {getattr(exc, 'strerror', None) or exc}") from None
    value, problem = json_problem(text)
    if problem:
        raise BuildError(f"{what} {path}: {problem}")
    return value


def _is_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _tasks_from_file(path: Path, sources: Sources) -> None:
    raw = _read_json(path, "tasks file")
    if not isinstance(raw, list):
        raise BuildError(f"tasks file {path} must be a JSON list of task objects, got {kind(raw)}")
    first_item: dict[str, int] = {}
    for i, item in enumerate(raw):
        source = f"tasks file {path}: item {i}"
        if not isinstance(item, dict) or not _is_id(item.get("id")):
            got = kind(item) if not isinstance(item, dict) else f"an object with id {kind(item.get('id'))}"
            detail = f"a task must be an object with a string or integer 'id', got {got}"
            sources.unusable.append((source, item, "bad_task", detail))
            continue
        task_id = str(item["id"])
        if task_id in first_item:
            detail = f"task id {task_id!r} is already used by item {first_item[task_id]}; the first one is kept"
            sources.unusable.append((source, item, "duplicate_task_id", detail))
            continue
        first_item[task_id] = i
        sources.by_id[task_id] = item


def load_sources(opts: Tau2Options) -> Sources:
    """The tasks, the split's ids, the policy and the tools, from the options or the domain's data."""
    from rewardkit.envs import get_domain

    try:
        data = get_domain(opts.domain)
    except ValueError as exc:
        raise BuildError(str(exc)) from None
    sources = Sources({}, [], "", data.tool_specs(), data)
    if opts.tasks_file is None:
        sources.by_id = dict(data.tasks())
    else:
        _tasks_from_file(opts.tasks_file, sources)

    splits = data.splits() if opts.split_file is None else _read_json(opts.split_file, "split file")
    if not isinstance(splits, dict):
        raise BuildError(f"split file {opts.split_file} must be a JSON object: split name -> task ids")
    if opts.split not in splits:
        raise BuildError(f"split {opts.split!r} not in the split file; it has: {', '.join(splits)}")
    ids = splits[opts.split]
    if not isinstance(ids, list):
        raise BuildError(f"split {opts.split!r} must be a list of task ids, got {kind(ids)}")
    bad = next((i for i, x in enumerate(ids) if not _is_id(x)), None)
    if bad is not None:
        raise BuildError(
            f"split {opts.split!r}: item {bad} must be a task id (a string or an integer), got {kind(ids[bad])}"
        )
    sources.ids = [str(i) for i in ids]

    if opts.policy_file is None:
        sources.policy = data.policy()
    else:
        try:
            sources.policy = opts.policy_file.read_bytes().decode("utf-8").removeprefix("\ufeff")
        except OSError as exc:
            raise BuildError(f"policy file {opts.policy_file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise BuildError(f"policy file {opts.policy_file} is not UTF-8 text: {exc}") from None
    return sources


def task_problem(task: Mapping[str, Any], domain: Domain) -> tuple[str, str] | None:
    """(reason, detail) when a task the split names cannot become a row, else None.

    Its verdict first (:func:`rewardkit.envs.task_verdict.task_verdict`: the task's shape with the tools' schemas, its
    gold and its script replayed on a fresh copy of the database; a task whose replay the tools could not answer
    is rejected as ``tool_sim_error`` or ``env_error`` too), then what a row needs besides: a request to open the
    conversation with, and a task that can be written back as UTF-8.
    """
    verdict = task_verdict(domain.name, task)
    if verdict.problem is not None:
        return verdict.problem
    reason = tasks.reason_for_call(task)
    if not isinstance(reason, str) or not reason.strip():
        return "no_reason_for_call", "user_scenario.instructions.reason_for_call must be a non-empty string"
    if not encodable(task):
        return "bad_task", f"the task {SURROGATE}"
    return None
