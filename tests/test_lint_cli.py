"""``rewardkit lint`` through the real CLI: every output checked against every input, settings that cannot mean
anything refused, reward files that fail to load one line and exit 2, a reward's own exit a failed check, and
SIGTERM during a hostile check ending the run and its children at once (a real subprocess, a real signal).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from broken_rewards import ROWS

from rewardkit.recipes import recipe_path

BROKEN = Path(__file__).with_name("broken_rewards.py")
GOOD = f"{BROKEN}:exact_answer"
RECIPE = str(recipe_path("planning/tiny_grpo.yaml"))


def rows_file(tmp_path: Path, text: str | None = None) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text(text if text is not None else "".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def lint(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from rewardkit.cli import main

    capsys.readouterr()
    try:
        code = main(["lint", *map(str, args)])
    except SystemExit as exc:  # argparse refuses a flag: one line, exit 2
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def usage_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, _, err = lint(capsys, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1, (code, err)
    return err.strip()


def reward_file(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "my_reward.py"
    path.write_text(source, encoding="utf-8")
    return path


# --json onto an input: refused before anything runs, the input left as it was.
@pytest.mark.parametrize(
    ("target", "json_onto"),
    [
        ("reward", "data"),  # the rows
        ("reward", "reward"),  # the reward's own .py
        ("reward", "link"),  # a symlink to the rows
        ("recipe", "data"),  # --dataset
        ("recipe", "sft"),  # --sft
        ("recipe", "recipe"),  # the recipe itself
        ("recipe", "config"),  # the reward config the recipe's ENV names
        ("tokens", "tokenizer"),  # MODEL/tokenizer.json: writing it would break the model
    ],
)
def test_json_never_replaces_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, json_onto: str
) -> None:
    data = rows_file(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}", encoding="utf-8")
    reward = reward_file(tmp_path, BROKEN.read_text(encoding="utf-8"))
    (tmp_path / "link.jsonl").symlink_to(data)
    (tmp_path / "sft").mkdir()
    sft = rows_file(tmp_path / "sft")
    config = recipe_path("planning/tiny_reward_config.yaml")
    onto = {
        "data": data,
        "reward": reward,
        "link": tmp_path / "link.jsonl",
        "sft": sft,
        "recipe": Path(RECIPE),
        "config": config,
        "tokenizer": model / "tokenizer.json",
    }[json_onto]
    before = onto.read_bytes()
    args = {
        "reward": ["reward", f"{reward}:exact_answer", "--data", data],
        "recipe": [RECIPE, "--dataset", data, "--sft", sft],
        "tokens": ["tokens", "--model", model, "--data", data],
    }[target]
    err = usage_error(capsys, *args, "--json", onto)
    assert "is also an input" in err and onto.read_bytes() == before


def test_an_unwritable_json_is_refused_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = rows_file(tmp_path)
    start = time.monotonic()
    err = usage_error(capsys, "reward", GOOD, "--data", data, "--json", data / "report.json")  # under a file
    assert "is not a directory" in err and time.monotonic() - start < 5  # nothing was checked first


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--margin", "nan"], "--margin: 'nan' is not a finite number"),
        (["--margin", "-0.1"], "--margin: '-0.1' is not a finite number"),
        (["--time-limit", "nan"], "--time-limit: 'nan' is not a finite number in (0, 3600]"),
        (["--time-limit", "inf"], "--time-limit: 'inf' is not a finite number in (0, 3600]"),
        (["--time-limit", "0"], "--time-limit: '0' is not a finite number in (0, 3600]"),
        (["--draws", "0"], "--draws: '0' is not an integer >= 1"),
        (["--check-time", "inf"], "--check-time: 'inf' is not a finite number"),
        (["--skip", "shap"], "skip: unknown check(s) ['shap']"),
        (["--margin", "2"], "margin must be a finite number in [0, 1]"),  # wider than the reward's range [0, 1]
    ],
    ids=[
        "margin-nan",
        "margin-negative",
        "time-nan",
        "time-inf",
        "time-0",
        "draws-0",
        "check-time-inf",
        "skip-unknown",
        "margin-wider-than-range",
    ],
)
def test_settings_that_cannot_mean_anything_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert message in usage_error(capsys, "reward", GOOD, "--data", rows_file(tmp_path), *args)


def test_lint_recipe_refuses_a_margin_over_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # lint RECIPE's margin is a share of the weights' sum: 1.5 would ask every probe to score below 0.
    err = usage_error(capsys, RECIPE, "--dataset", rows_file(tmp_path), "--margin", "1.5")
    assert "lint RECIPE's margin is a share of the weights' sum, 0 to 1" in err


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("raise RuntimeError('boom')\n", "importing it raised RuntimeError: boom"),
        ("import no_such_module_here\n", "importing it raised ModuleNotFoundError: No module named"),
        ("from . import sibling\n", "(a relative import: FILE.py is loaded on its own"),
        ("import sys\nsys.exit(0)\n", "importing it raised SystemExit: 0"),  # before: exit 0, no table
        ("import os\nos._exit(0)\n", "exited with status 0 before returning a result"),  # only a child survives it
        ("while True:\n    pass\n", "did not finish within 1 s"),  # before: hung forever
        (
            "class R:\n    def __init__(self):\n        raise KeyError('cfg')\n    def __call__(self, c, **k):\n"
            "        return [1.0] * len(c)\n",
            "building it with no arguments raised KeyError: 'cfg'",
        ),
        ("import sys\nclass R:\n    def __init__(self):\n        sys.exit(3)\n", "raised SystemExit: 3"),
        (
            "class R:\n    gameable = '*'\n    def __call__(self, c, **k):\n        return [1.0] * len(c)\n",
            "gameable must map probe names (or '*') to a reason",
        ),
        (
            "class R:\n    range = (1, 0)\n    def __call__(self, c, **k):\n        return [1.0] * len(c)\n",
            "low <= high",
        ),
        (
            "class R:\n    range = ('0', '1')\n    def __call__(self, c, **k):\n        return [1.0] * len(c)\n",
            "two finite numbers",
        ),
    ],
    ids=[
        "raises",
        "missing-module",
        "relative-import",
        "exit-at-import",
        "os-exit-at-import",
        "hangs-at-import",
        "init-raises",
        "init-exits",
        "gameable-star",
        "range-reversed",
        "range-strings",
    ],
)
def test_a_reward_file_that_cannot_load_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, message: str
) -> None:
    name = "R" if "class R" in source else "f"
    path = reward_file(tmp_path, source + ("" if name == "R" else "\ndef f(c, **k):\n    return [1.0] * len(c)\n"))
    report = tmp_path / "report.json"
    args = ["reward", f"{path}:{name}", "--data", rows_file(tmp_path), "--check-time", "1", "--json", report]
    assert message in usage_error(capsys, *args)
    assert not report.exists()


EXITS_ON_EMPTY = """
import sys

def f(completions, solution, **kwargs):
    if any(c == "" for c in completions):
        sys.exit(0)
    return [float(c == f"<answer>{s}</answer>") for c, s in zip(completions, solution)]
"""


def test_a_reward_that_exits_fails_its_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    path = reward_file(tmp_path, EXITS_ON_EMPTY)
    args = ["reward", f"{path}:f", "--data", rows_file(tmp_path), "--json", report, "--skip", "conversational"]
    code, out, _ = lint(capsys, *args, "--time-limit", "0.5")
    assert code == 1 and "FAIL" in out  # before: exit 0, no table, no JSON
    failed = {c["name"]: c["detail"] for c in json.loads(report.read_text())["checks"] if not c["passed"]}
    assert set(failed) == {"hostile:empty", "gaming:empty"} and "sys.exit(0)" in failed["hostile:empty"]
    assert json.loads(report.read_text())["skipped"] == ["conversational"] and "skipped: conversational" in out


SURROGATE = """
def f(completions, solution, **kwargs):
    if any(c == "" for c in completions):
        raise ValueError("bad \\ud800")
    return [float(c == f"<answer>{s}</answer>") for c, s in zip(completions, solution)]
"""


def test_a_lone_surrogate_in_an_error_still_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    path = reward_file(tmp_path, SURROGATE)
    code, out, _ = lint(capsys, "reward", f"{path}:f", "--data", rows_file(tmp_path), "--json", report)
    assert code == 1 and "\\ud800" in out  # before: UnicodeEncodeError, exit 1, no report
    assert "\\ud800" in report.read_text(encoding="utf-8")


def test_no_isolate_runs_a_reward_that_cannot_fork(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # test_kit_false_passes.BackgroundLock: a child forked while its thread holds the lock waits for it forever.
    spec = f"{Path(__file__).with_name('test_kit_false_passes.py')}:BackgroundLock"
    args = ["reward", spec, "--data", rows_file(tmp_path), "--time-limit", "1", "--skip", "threads"]
    code, out, _ = lint(capsys, *args, "--no-isolate")
    assert code == 0, out


@pytest.mark.parametrize("target", ["reward", "recipe", "tokens"])
def test_nan_literals_are_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str) -> None:
    data = rows_file(tmp_path, '{"solution": "1", "completion": "x", "score": NaN}\n')
    model = tmp_path / "model"
    model.mkdir()
    args = {
        "reward": ["reward", GOOD, "--data"],
        "recipe": [RECIPE, "--dataset"],
        "tokens": ["tokens", "--model", model, "--data"],
    }[target]
    assert "rows.jsonl:1: not valid JSON (NaN is not valid JSON)" in usage_error(capsys, *args, data)


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc's children lists)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                kids = {int(k) for k in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += list(kids - found)
            found |= kids
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process: it exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_sigterm_during_a_hostile_check_stops_the_run_and_its_children(tmp_path: Path) -> None:
    # slow_on_regex_bomb backtracks for ever on the regex-bomb input; with a 60 s time limit the hostile child
    # would live for a minute. SIGTERM must end the lint (exit 143) and kill that child at once.
    generic = "shape,values,determinism,independence,no_mutation,extra_columns,missing_column,pickle,threads"
    args = [
        "lint",
        "reward",
        f"{BROKEN}:slow_on_regex_bomb",
        "--data",
        str(rows_file(tmp_path)),
        "--time-limit",
        "60",
        "--skip",
        f"{generic},conversational,gaming",
    ]
    proc = subprocess.Popen([sys.executable, "-m", "rewardkit.cli", *args], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not descendants(proc.pid) and time.monotonic() < deadline:  # the hostile child is running
            time.sleep(0.2)
        time.sleep(2)  # well inside the regex bomb (the earlier hostile inputs take milliseconds)
        children = descendants(proc.pid)
        assert children, "no hostile child was started"
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
        assert time.monotonic() - start < 5 and code == 143, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.5)  # a grandchild dies by its parent-death signal, a moment after its parent
        assert not [c for c in children if running(c)]  # none left to run out its regex
    finally:
        if proc.poll() is None:
            proc.kill()
