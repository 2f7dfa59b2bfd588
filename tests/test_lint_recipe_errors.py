"""``rewardkit lint RECIPE.yaml --dataset FILE`` refuses what cannot mean anything, in one line (exit 2).

Weights that are not finite numbers within the bound, or that are all 0; tau2 rows whose ``messages`` or ``task``
cannot be played; planning rows whose ``solution`` is not a gold answer. A reward listed twice counts once, with
its entries' weights added, as ms-swift adds them. Run in this process through ``rewardkit.cli.main``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rewardkit.recipes import EXAMPLES

BOUND = "finite number from -1,000,000 to 1,000,000"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def strict_json(text: str) -> Any:
    """JSON as the standard has it: NaN and Infinity are refused."""

    def refuse(name: str) -> None:
        raise ValueError(f"{name} in the report")

    return json.loads(text, parse_constant=refuse)


def lint(capsys: pytest.CaptureFixture[str], recipe: Path, dataset: Path) -> tuple[int, str, Path]:
    """``rewardkit lint RECIPE --dataset FILE --json OUT``: the exit code, stderr and OUT."""
    from rewardkit.cli import main

    out = recipe.parent / "lint.json"
    capsys.readouterr()
    code = main(["lint", str(recipe), "--dataset", str(dataset), "--json", str(out)])
    return code, capsys.readouterr().err, out


def refused(capsys: pytest.CaptureFixture[str], recipe: Path, dataset: Path) -> str:
    """The run's one stderr line; it is a usage error (exit 2) and wrote no report."""
    code, err, out = lint(capsys, recipe, dataset)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    return err.strip()


@pytest.fixture
def completions(tmp_path: Path) -> Path:
    """Two planning rows with their gold ``completion`` (the README's demo completions)."""
    lines = (EXAMPLES / "completions.jsonl").read_text(encoding="utf-8").splitlines()
    return write_jsonl(tmp_path / "rows.jsonl", [json.loads(line) for line in lines[:2]])


def recipe_file(tmp_path: Path, funcs: str, weights: str | None = None) -> Path:
    recipe = tmp_path / "r.yaml"
    lines = [f"reward_funcs: {funcs}"] + ([f"reward_weights: {weights}"] if weights is not None else [])
    recipe.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return recipe


@pytest.mark.parametrize(
    ("funcs", "weights", "message"),
    [
        # YAML's NaN: weight x score is NaN, and so is every total it is in.
        (
            "[strict_format]",
            "[.nan]",
            "reward_weights[0] (the weight of strict_format) is a number (nan), not a finite number",
        ),
        # A string ms-swift's float() would read as NaN.
        (
            "[strict_format]",
            '["nan"]',
            "reward_weights[0] (the weight of strict_format) is a string ('nan'), not a finite number",
        ),
        # YAML's infinity: inf x 0 is NaN.
        ("[strict_format]", "[.inf]", "is a number (inf), not a finite number"),
        # The string, negative.
        ("[strict_format]", '["-inf"]', "is a string ('-inf'), not a finite number"),
        # Finite, but 1e308 x 2 overflows: out of the bound.
        ("[strict_format]", '["1e308"]', "is a string ('1e308'), not from -1,000,000 to 1,000,000"),
        # The same as a YAML float.
        ("[strict_format]", "[1.0e+308]", "is a number (1e+308), not from -1,000,000 to 1,000,000"),
        # Just past the bound.
        ("[strict_format]", "[-1000001]", "is a number (-1000001), not from -1,000,000 to 1,000,000"),
        # An integer too large for a float at all (OverflowError, not a traceback).
        ("[strict_format]", f"[{'9' * 400}]", "not from -1,000,000 to 1,000,000"),
        # A boolean is not a number, though float(True) is 1.0.
        ("[strict_format]", "[true]", "is a boolean (true), not a number"),
        # Text that is no number.
        ("[strict_format]", '["heavy"]', "is a string ('heavy'), not a number"),
        # A nested list.
        ("[strict_format]", "[[1]]", "is a list, not a number"),
        # The second entry: the index and the reward it weights are named.
        (
            "[strict_format, json_valid]",
            '["0.5", .nan]',
            "reward_weights[1] (the weight of json_valid) is a number (nan), not a finite number",
        ),
        # Every weight 0, as numbers and as strings: nothing would be trained.
        (
            "[strict_format, json_valid]",
            '[0, "0.0"]',
            "reward_weights give every reward a weight of 0, so GRPO "
            "would train nothing; give at least one reward a weight other than 0",
        ),
        # A repeated reward whose entries cancel: 0.5 x s - 0.5 x s = 0 on every completion.
        (
            "[strict_format, strict_format]",
            "[0.5, -0.5]",
            "reward_weights give every reward a weight of 0 once the "
            "weights of a repeated reward are added up ({'strict_format': [0.5, -0.5]})",
        ),
        # One weight for two rewards (kept from before).
        ("[strict_format, json_valid]", "[1]", "2 reward_funcs but 1 reward_weights"),
    ],
    ids=[
        "yaml-nan",
        "string-nan",
        "yaml-inf",
        "string-minus-inf",
        "string-1e308",
        "yaml-1e308",
        "past-bound",
        "int-overflow",
        "boolean",
        "text",
        "nested-list",
        "second-index",
        "all-zero",
        "merged-zero",
        "count",
    ],
)
def test_a_weight_that_means_nothing_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], completions: Path, funcs: str, weights: str, message: str
) -> None:
    recipe = recipe_file(tmp_path, funcs, weights)
    err = refused(capsys, recipe, completions)
    assert f"{recipe}: " in err and message in err, err
    if "reward_weights[" in message:  # and says how to fix it
        assert f"give each weight as a {BOUND}" in err, err


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        # The bound itself and a negative weight, as YAML strings (as the bundled recipes write them).
        ('["1e6", "-0.5"]', [1e6, -0.5]),
        # Numbers, one an integer; one weight 0 is fine while another is not.
        ("[2, 0]", [2.0, 0.0]),
    ],
    ids=["strings-at-bound", "numbers-one-zero"],
)
def test_finite_weights_within_the_bound_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], completions: Path, weights: str, expected: list[float]
) -> None:
    code, err, out = lint(capsys, recipe_file(tmp_path, "[strict_format, json_valid]", weights), completions)
    assert code in (0, 1), err
    report = strict_json(out.read_text(encoding="utf-8"))  # no NaN or Infinity anywhere
    assert [r["weight"] for r in report["rewards"].values()] == expected
    assert report["merged"] == {}


def _margin(report: dict) -> str:
    """The margin of the first probe check (``margin`` x the sum of the weights)."""
    detail = next(c["detail"] for c in report["checks"] if c["name"].startswith("probe:"))
    return detail.split("margin ")[1]


@pytest.mark.parametrize(
    ("funcs", "weights", "same_as", "merged"),
    [
        # strict_format twice: ms-swift adds 0.1 x s + 0.2 x s = 0.3 x s; the sum 0.6 sets the margin.
        (
            "[strict_format, json_valid, strict_format]",
            '["0.1", "0.3", "0.2"]',
            ("[strict_format, json_valid]", '["0.3", "0.3"]'),
            {"strict_format": [0.1, 0.2]},
        ),
        # No reward_weights: 1 each, so json_valid listed twice weighs 2.
        (
            "[json_valid, strict_format, json_valid]",
            None,
            ("[json_valid, strict_format]", "[2, 1]"),
            {"json_valid": [1.0, 1.0]},
        ),
    ],
    ids=["explicit-weights", "default-weights"],
)
def test_a_repeated_reward_counts_once_with_its_weights_added(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    completions: Path,
    funcs: str,
    weights: str | None,
    same_as: tuple[str, str],
    merged: dict[str, list[float]],
) -> None:
    reports = []
    for f, w in ((funcs, weights), same_as):
        code, err, out = lint(capsys, recipe_file(tmp_path, f, w), completions)
        assert code in (0, 1), err
        reports.append(strict_json(out.read_text(encoding="utf-8")))
    repeated, summed = reports
    assert repeated["merged"] == merged and summed["merged"] == {}
    assert list(repeated["rewards"]) == list(summed["rewards"])  # each reward once, in the order of its first entry
    for key, r in repeated["rewards"].items():
        assert r["weight"] == pytest.approx(summed["rewards"][key]["weight"])
    names = [c["name"] for c in repeated["checks"]]
    assert len(names) == len(set(names)) and names == [c["name"] for c in summed["checks"]]
    assert _margin(repeated) == _margin(summed)  # margin x the sum of every entry's weight
    for name, probe in repeated["probes"].items():
        for field in ("gold", "probe", "gap"):
            assert probe[field] == pytest.approx(summed["probes"][name][field]), (name, field)


@pytest.fixture(scope="module")
def tau2_rows() -> list[dict]:
    """Two tau2 rows as `rewardkit build tau2-grpo` writes them ('messages', 'tools', 'task', 'domain')."""
    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo

    rows, _ = build_tau2_grpo(Tau2Options(domain="retail", split="train"))
    return rows[:2]


def _without_task(row: dict) -> None:
    del row["task"]


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        # A task that is a JSON list: the gold agent would index it by name.
        ("task", "[]", "column 'task': a task must be an object, got an empty list"),
        # A list as the cell itself.
        ("task", [{"evaluation_criteria": {}}], "column 'task': a task must be an object, got a list"),
        # A number.
        ("task", 5, "column 'task': a task must be an object, got a number (5)"),
        # An empty object: no gold actions or outputs to play.
        ("task", {}, "column 'task': the task has no evaluation_criteria to score a rollout against"),
        # null.
        ("task", None, "column 'task': a task must be an object, got null"),
        # Text that is not JSON.
        ("task", "retail #3", "column 'task': holds a string that is not JSON: 'retail #3'"),
        # Gold actions that are not a list (envs.tasks' own check, reused).
        (
            "task",
            {"evaluation_criteria": {"actions": "refund"}},
            "column 'task': evaluation_criteria.actions: must be a list of action objects, got a string ('refund')",
        ),
        # No task at all, while the other row has one.
        ("task", _without_task, "no column 'task'; a tau2 row has 'messages', 'task' and 'domain'"),
        # The prompt as one string: it would be read as its characters.
        (
            "messages",
            "Where is my order?",
            "column 'messages': must be a list of {role, content} messages, got a string ('Where is my order?')",
        ),
        # A list of strings, not of messages.
        ("messages", ["hi"], "column 'messages': message 1 is a string ('hi'), not a {role, content} object"),
        # A message without its text.
        ("messages", [{"role": "user"}], "column 'messages': message 1 has no 'content'"),
        # A role that is not a name.
        (
            "messages",
            [{"role": 1, "content": "hi"}],
            "column 'messages': message 1: 'role' must be a string, got a number (1)",
        ),
    ],
    ids=[
        "task-json-list",
        "task-list",
        "task-number",
        "task-empty",
        "task-null",
        "task-not-json",
        "task-bad-actions",
        "task-missing",
        "messages-string",
        "messages-of-strings",
        "message-no-content",
        "message-role-number",
    ],
)
def test_a_tau2_row_that_cannot_be_played_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tau2_rows: list[dict],
    column: str,
    value: Any,
    message: str,
) -> None:
    rows = [dict(r) for r in tau2_rows]
    if callable(value):
        value(rows[1])
    else:
        rows[1][column] = value  # row 2: the row is named 1-based, after a good row 1
    dataset = write_jsonl(tmp_path / "tau2.jsonl", rows)
    err = refused(capsys, recipe_file(tmp_path, "[task_completion]"), dataset)
    assert f"--dataset {dataset}: row 2: {message}" in err, err


@pytest.mark.parametrize(
    ("solution", "message"),
    [
        # Not JSON at all.
        ("a plan", "'solution' is not a gold answer's JSON (Expecting value"),
        # JSON, but a list where the answer object belongs.
        ("[1, 2]", "'solution' is not a gold answer's JSON ("),
    ],
    ids=["not-json", "not-an-object"],
)
def test_a_planning_row_without_a_gold_answer_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], completions: Path, solution: str, message: str
) -> None:
    rows = [json.loads(line) for line in completions.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        del row["completion"]  # the gold is formed from each row's solution
    rows[1]["solution"] = solution
    dataset = write_jsonl(tmp_path / "planning.jsonl", rows)
    err = refused(capsys, recipe_file(tmp_path, "[strict_format, json_valid]"), dataset)
    assert f"--dataset {dataset}: row 2: {message}" in err, err
