"""``rewardkit lint reward FILE.py:NAME --data ROWS.jsonl``: exit codes 0/1/2 and the ``--json`` shape.

The rewards are tests/broken_rewards.py's: ``exact_answer`` keeps the contract, each broken one breaks the check
``BROKEN`` names. Run in this process through ``rewardkit.cli.main``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

BROKEN_FILE = Path(__file__).with_name("broken_rewards.py")
# The README's example reward (and its test), read from the page so that the two cannot drift.
README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
README_EXAMPLE = re.compile(r"```python\n(def my_reward\(completions, solution, \*\*kwargs\):.*?)```", re.S)
README_REWARD = README_EXAMPLE.search(README).group(1)


def _rows(tmp_path: Path) -> Path:
    from broken_rewards import ROWS

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def lint(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from rewardkit.cli import main

    capsys.readouterr()
    code = main(["lint", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("name", "code", "failed_check"),
    [
        ("exact_answer", 0, None),  # the good reward: every check passes
        ("ExactAnswer", 0, None),  # a class, built with no arguments
        ("returns_nan", 1, "values"),  # NaN on a row: the values check fails
        ("wrong_length", 1, "shape"),  # one score too few
        ("rewards_length", 1, "gaming:max_length"),  # pays for length: the 16k-char probe beats the gold
    ],
)
def test_exit_code_and_json_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, code: int, failed_check: str | None
) -> None:
    report = tmp_path / "report.json"
    got, out, _ = lint(capsys, "reward", f"{BROKEN_FILE}:{name}", "--data", str(_rows(tmp_path)), "--json", str(report))
    assert got == code
    data = json.loads(report.read_text(encoding="utf-8"))
    assert set(data) >= {"checks"} and data["checks"]
    for check in data["checks"]:
        assert set(check) >= {"name", "passed", "detail"}
        assert isinstance(check["passed"], bool) and isinstance(check["detail"], str)
    failed = {c["name"] for c in data["checks"] if not c["passed"]}
    if failed_check is None:
        assert failed == set() and "checks passed" in out
    else:
        assert failed_check in failed and "FAIL" in out


@pytest.mark.parametrize(
    ("spec", "data", "message"),
    [
        ("missing.py:exact_answer", None, "missing.py: not found"),  # a bad path
        ("{broken}:no_such_reward", None, "no 'no_such_reward'"),  # NAME missing (the callables are listed)
        ("{broken}", None, "expected FILE.py:NAME"),  # no NAME at all
        ("{broken}:exact_answer", '{"solution": "1", "completion": "x"}\n{"solution": \n', "rows.jsonl:2"),  # JSONL
        ("{broken}:exact_answer", '{"solution": "1"}\n', "rows.jsonl:1: no 'completion' column"),  # no gold
    ],
)
def test_usage_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, data: str | None, message: str
) -> None:
    rows = _rows(tmp_path)
    if data is not None:
        rows.write_text(data, encoding="utf-8")
    report = tmp_path / "report.json"
    code, _, err = lint(capsys, "reward", spec.format(broken=BROKEN_FILE), "--data", str(rows), "--json", str(report))
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not report.exists()  # nothing half-done is written


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reward", "x.py:f"], "needs --data"),
        (["reward", "x.py:f", "--data", "r.jsonl", "--model", "m"], "--model does not apply to lint reward"),
        (["tokens", "--data", "r.jsonl"], "needs --model"),
        (["recipe.yaml"], "needs --dataset"),
        (["something"], "expected reward, tokens or a RECIPE.yaml"),
    ],
)
def test_flags_that_do_not_fit_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = lint(capsys, *args)
    assert code == 2 and message in err, err


# The README's reward as a plain function and as the class reward() makes of it: `**kwargs` is no column, TRL's message
# lists are read, and no probe scores like the gold (an exact match of the answer block).
@pytest.mark.parametrize("name", ["my_reward", "MyReward"])
def test_the_readmes_example_passes_lint(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    module = tmp_path / "my_rewards.py"
    module.write_text(f"from rewardkit.rewards import reward\n\n{README_REWARD}\nMyReward = reward(my_reward)\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"solution": "42", "completion": "<answer>42</answer>"}\n', encoding="utf-8")
    report = tmp_path / "report.json"
    code, _, _ = lint(capsys, "reward", f"{module}:{name}", "--data", str(rows), "--json", str(report))
    checks = json.loads(report.read_text(encoding="utf-8"))["checks"]
    assert code == 0, [c for c in checks if not c["passed"]]
    assert len(checks) > 20 and all(c["passed"] for c in checks)
