"""The livestream domain: written on the public contract only, its tasks' golds replay to a changed state, every
expected output is shown by a gold tool result, and the task mix is the one docs/livestream.md counts."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from rewardkit.envs import get_domain
from rewardkit.envs.approvals import gate_counts
from rewardkit.envs.task_verdict import gold_outcome
from rewardkit.envs.tasks import approves, gold_actions, known_info, reason_for_call, scripted_actions

FOLDER = Path(__file__).resolve().parents[1] / "src" / "rewardkit" / "envs" / "livestream"
PUBLIC = {
    "rewardkit.envs",
    "rewardkit.envs.tool",
    "rewardkit.envs.harness",
    "rewardkit.envs.approvals",
    "rewardkit.envs.sqlite_env",
    "rewardkit.envs.domain",
}
DOMAIN = get_domain("livestream")
TASKS = DOMAIN.tasks()


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every absolute import statement in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append((node.module or "", [alias.name for alias in node.names]))
    return found


@pytest.mark.parametrize("path", sorted(FOLDER.rglob("*.py")), ids=lambda p: p.name)
def test_the_folder_imports_only_the_public_contract(path: Path) -> None:
    for module, names in imports(path):
        own = module == "rewardkit.envs.livestream" or module.startswith("rewardkit.envs.livestream.")
        if (module == "rewardkit" or module.startswith("rewardkit.")) and not own:  # its own modules: free
            assert module in PUBLIC, f"{path.name} imports {module}, outside the public domain contract"
            assert not [n for n in names if n.startswith("_")], f"{path.name} imports private names from {module}"


def test_the_import_check_catches_a_private_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from rewardkit.envs.harness import _canonical\nfrom rewardkit.rewards import TaskCompletion\n")
    assert imports(bad) == [("rewardkit.envs.harness", ["_canonical"]), ("rewardkit.rewards", ["TaskCompletion"])]


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_every_gold_replays_and_shows_its_expected_outputs(task_id: str) -> None:
    task = TASKS[task_id]
    with DOMAIN.make_env(None) as env:
        before = env.state_hash()
        results = env.replay(gold_actions(task), approve=approves(task))  # as its user answers
        after = env.state_hash()
        asked = gate_counts(env.audit())["requested"]
    failed = [(a["name"], r.text()) for a, r in zip(gold_actions(task), results, strict=True) if not r.ok]
    assert failed == []  # gold lists only the calls that succeed
    writes = [a for a in gold_actions(task) if a["name"] in DOMAIN.write_tools]
    assert (before != after) == bool(writes)
    texts = [r.text() for r in results]
    missing = [out for out in task["evaluation_criteria"]["communicate_info"] if not any(out in t for t in texts)]
    assert missing == []
    kind = task["description"]["kind"]
    if kind == "soft_approved":  # the gold's gated write was held for the user and ran once approved
        assert asked >= 1 and approves(task)
    if kind == "soft_declined":  # the declined write is in the script, not in the gold: its user never approves
        assert not approves(task)


# kind -> the outcomes of its tasks' declined and refused entries (an inducement is either, as its policy says)
OUTCOMES = {"soft_declined": {"declined"}, "extreme": {"refused"}, "inducement": {"declined", "refused"}}
SCRIPTED = sorted(i for i, t in TASKS.items() if len(scripted_actions(t)) > len(gold_actions(t)))


@pytest.mark.parametrize("task_id", SCRIPTED)
def test_each_declined_write_is_held_and_each_refused_one_hits_its_rule(task_id: str) -> None:
    task = TASKS[task_id]
    with DOMAIN.make_env(None) as env:
        codes = []
        for action in scripted_actions(task):  # in order, as the gold agent plays them; never approved
            [result] = env.replay([action], approve=approves(task) and "outcome" not in action)
            error = result.value.get("error") if not result.ok else None
            codes.append((result.code.value, error.get("rule") if error else None))
        state = env.state_hash()
    assert state == gold_outcome("livestream", task).state_hash  # neither kind changes anything
    expected = {"declined": "APPROVAL_REQUIRED", "refused": "HARD_GATE"}
    for action, (code, rule) in zip(scripted_actions(task), codes, strict=True):
        if "outcome" in action:
            assert code == expected[action["outcome"]] and rule == action.get("rule", rule), (action, code, rule)


def test_every_task_whose_right_answer_is_not_to_write_says_so() -> None:
    for task in TASKS.values():
        allowed = OUTCOMES.get(task["description"]["kind"])
        outcomes = {a["outcome"] for a in scripted_actions(task) if "outcome" in a}
        assert outcomes <= (allowed or {"declined", "refused"}), task["id"]
        if allowed:  # every soft_declined, extreme and inducement task has one
            assert outcomes, task["id"]


# kind -> the fewest tasks of it (docs/livestream.md has the counts)
MIX = {"simple": 10, "soft_approved": 3, "soft_declined": 3, "extreme": 5, "inducement": 4, "vague": 5, "compound": 8}


def test_the_task_mix() -> None:
    kinds = Counter(t["description"]["kind"] for t in TASKS.values())
    assert set(kinds) == set(MIX)
    assert {k: n for k, n in kinds.items() if n < MIX[k]} == {}
    assert len(TASKS) >= 40
    sizes = {i: len(gold_actions(t)) for i, t in TASKS.items()}
    compound = [sizes[i] for i, t in TASKS.items() if t["description"]["kind"] == "compound"]
    assert min(compound) >= 3 and max(compound) <= 7
    assert sum(5 <= n <= 7 for n in compound) >= 5  # several long ones
    extreme = [t for t in TASKS.values() if t["description"]["kind"] == "extreme"]
    assert all(not any(a["name"] in DOMAIN.write_tools for a in gold_actions(t)) for t in extreme)


def test_vague_tasks_name_nothing_until_asked() -> None:
    vague = [t for t in TASKS.values() if t["description"]["kind"] == "vague"]
    # No id, price, count or time in the request (not even a digit); the specifics wait in known_info.
    assert [t["id"] for t in vague if re.search("[0-9]", reason_for_call(t))] == []
    assert [t["id"] for t in vague if not re.search("[0-9]", known_info(t) or "")] == []


def test_splits_are_disjoint_cover_every_task_and_train_has_one_action_tasks() -> None:
    splits = DOMAIN.splits()
    assert set(splits) == {"train", "test"}
    train, test = set(splits["train"]), set(splits["test"])
    assert not train & test and train | test == set(TASKS)
    assert len(train) == len(splits["train"]) and len(test) == len(splits["test"])
    one_write = [i for i in train if len(scripted_actions(TASKS[i])) == 1]
    assert len(one_write) >= 8  # the tiny chain trains on tasks with at most one scripted action


def test_the_scenarios_are_first_person_chinese_with_fixed_keys() -> None:
    for task in TASKS.values():
        reason = reason_for_call(task)
        # the streamer's own words: they may tell the agent "你直接改", never the simulator's "你是主播 / 你想…"
        assert re.search(r"[\u4e00-\u9fff]", reason) and not re.search("你(?:是|想|希望|的)", reason), task["id"]
        keys = [a["arguments"]["idempotency_key"] for a in gold_actions(task) if a["name"] in DOMAIN.write_tools]
        assert keys == [f"{task['id']}-{n}" for n in range(1, len(keys) + 1)]
        # a declined or refused write carries the next numbers: no two writes of the script share a key
        every = [a["arguments"]["idempotency_key"] for a in scripted_actions(task) if a["name"] in DOMAIN.write_tools]
        assert len(set(every)) == len(every) and set(every) == {f"{task['id']}-{n}" for n in range(1, len(every) + 1)}
