"""``synth agent``, ``eval agent`` and ``eval compare`` through ``rewardkit.cli.main``: one writer per log, outputs
that land together or not at all, every option checked, and each failure one line (the gold agent and the
scripted customer, on the real retail tasks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_eval_metrics import A, B, run, write_jsonl

from rewardkit.cli import main
from rewardkit.runs.episodes import episode_log
from rewardkit.runs.episodes import spec as spec_module
from rewardkit.runs.episodes.episode_log import EpisodeLog, RunError
from rewardkit.runs.episodes.spec import RunSpec, build_plan
from rewardkit.runs.stats.metrics import compare, task_stats
from rewardkit.runs.stats.tables import read_run, write_task_table

EVAL = ["eval", "agent", "--agent", "gold", "--split", "test", "--trials", "1", "--no-progress"]
SYNTH = ["synth", "agent", "--agent", "gold", "--tasks", "10", "--no-progress"]
OUTPUTS = ("tasks.jsonl", "tasks.csv", "summary.json", "eval.png")


def one_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    (line,) = err.splitlines()
    assert line.startswith(f"rewardkit {command}: "), line
    return line.removeprefix(f"rewardkit {command}: ")


def snapshot(directory: Path) -> dict[str, bytes]:
    paths = sorted(directory.rglob("*"))
    return {str(p.relative_to(directory)): b"dir" if p.is_dir() else p.read_bytes() for p in paths}


# --- one writer per log ----------------------------------------------------------------------------------


def test_a_second_eval_into_the_same_out_dir_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "d"
    with EpisodeLog(out / "episodes.jsonl", "another-run", resume=False, choose="another --out-dir"):
        assert main([*EVAL, "--limit", "1", "--out-dir", str(out)]) == 2  # once both runs exited 0
        assert one_line(capsys, "eval agent") == (
            f"{out / 'episodes.jsonl'} is being written by another run (pid {os.getpid()}); wait for it or "
            "choose another --out-dir"
        )
    assert list(out.iterdir()) == []  # the refused run wrote nothing; the holder's lock went with it


def test_the_mcp_server_is_part_of_the_fingerprint_only_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spec_module, "_domain", lambda spec: spec_module.get_domain(spec.domain))  # no server
    plain = build_plan(RunSpec(domain="retail", agent="gold", split="test", limit=1))[1]
    one, other = (
        build_plan(RunSpec(domain="retail", agent="gold", split="test", limit=1, mcp=m))[1] for m in ("a.py", "b.py")
    )
    assert "mcp" not in plain and (one["mcp"], other["mcp"]) == ("a.py", "b.py")
    assert len({plain["run"], one["run"], other["run"]}) == 3  # three servers' runs never mix in one log
    # Without --mcp the fingerprint hashes exactly the dict it hashed before the MCP server was added.
    unhashed = ("run", "trials", "tasks", "settings", "unusable_tasks", "domain_ref")
    described = {k: v for k, v in plain.items() if k not in unhashed}
    assert plain["run"] == episode_log.fingerprint(described)


# --- outputs land together -------------------------------------------------------------------------------------


def test_eval_outputs_land_together_or_not_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path)
    assert main([*EVAL, "--limit", "2", "--out-dir", out]) == 0
    before = {name: (tmp_path / name).read_bytes() for name in OUTPUTS}
    # One more task, and a title matplotlib cannot draw: the run's episodes are logged, no report is replaced.
    assert main([*EVAL, "--limit", "3", "--resume", "--title", r"$\foo$", "--out-dir", out]) == 2
    message = one_line(capsys, "eval agent")
    assert message.startswith(f"cannot draw {tmp_path / 'eval.png'} (title '$\\\\foo$')"), message
    assert {name: (tmp_path / name).read_bytes() for name in OUTPUTS} == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".tmp", ".lock"))]
    assert len((tmp_path / "episodes.jsonl").read_text().splitlines()) == 3
    assert main([*EVAL, "--limit", "3", "--resume", "--title", r"\$5 agent", "--out-dir", out]) == 0
    assert len((tmp_path / "tasks.jsonl").read_text().splitlines()) == 3  # 2 + the one the failed run added
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"]["total"] == 3


def test_compare_writes_out_and_png_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "a.jsonl", run(A))
    write_jsonl(tmp_path / "$\\foo$.jsonl", run(B))  # the file name is the plot's label
    (tmp_path / "c.json").write_text("old", encoding="utf-8")
    assert main(["eval", "compare", "a.jsonl", "$\\foo$.jsonl", "--out", "c.json", "--png", "c.png"]) == 2
    assert one_line(capsys, "eval compare").startswith("cannot draw --png c.png")
    assert (tmp_path / "c.json").read_text() == "old" and not (tmp_path / "c.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["$\\foo$.jsonl", "a.jsonl", "c.json"]


# --- options ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),  # was numpy's ValueError
        (["--boot", "100000000"], "--boot: need n_boot >= 1 and at most 100000 resamples, got 100000000"),
        (["--confidence", "nan"], "--confidence: need 0 < confidence < 1, got nan"),
    ],
)
def test_compare_options_are_checked(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", run(A))
    assert main(["eval", "compare", str(a), str(a), *options]) == 2
    assert one_line(capsys, "eval compare") == message


def test_the_bootstrap_in_batches_draws_what_one_array_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardkit.runs.stats import paired

    whole = compare(run(A), run(B), n_boot=3001, seed=5)
    monkeypatch.setattr(paired, "_BOOT_CELLS", 70)  # 10 paired tasks: batches of 7 resamples, the last of 5
    assert compare(run(A), run(B), n_boot=3001, seed=5) == whole


def test_tasks_csv_is_read_back_as_the_per_task_table(tmp_path: Path) -> None:
    records = read_run(write_jsonl(tmp_path / "e.jsonl", run({"1": [1, 0], "2": [0, 0], "x": [1]})))
    write_task_table(task_stats(records), tmp_path / "t.jsonl", tmp_path / "t.csv")
    # "the per-task table" in either form: both read back as the same TaskStats, so eval compare takes both
    assert read_run(tmp_path / "t.csv") == read_run(tmp_path / "t.jsonl") == task_stats(records)
    lines = (tmp_path / "t.csv").read_text().splitlines()
    (tmp_path / "bad.csv").write_text("\n".join([lines[0], lines[1], lines[2].replace(",0,", ",zero,", 1)]) + "\n")
    with pytest.raises(ValueError, match=r"bad\.csv:3: 'successes' must be a number, got 'zero'"):
        read_run(tmp_path / "bad.csv")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"other\.csv:1: a per-task table needs the columns"):
        read_run(tmp_path / "other.csv")


PROMPT = "You are a retail agent.\n"


@pytest.mark.parametrize(
    ("argv", "command", "files", "message"),
    [
        (
            ["synth", "agent", "--agent", "gold", "--out", "."],
            "synth agent",
            {},
            "--out . is a directory; give a file path",
        ),  # was a traceback from Path.with_suffix
        (
            [*SYNTH[:4], "--tasks", " , ", "--out", "o.jsonl"],
            "synth agent",
            {},
            "--tasks ' , ' names no task id; give comma-separated ids (--tasks 0,2), or leave --tasks out for the "
            "whole split",
        ),
        (
            [*SYNTH, "--system-prompt", "nope.txt", "--out", "o.jsonl"],
            "synth agent",
            {},
            "--system-prompt nope.txt: not found; give the prompt's text file",
        ),
        (
            [*SYNTH, "--system-prompt", "p", "--out", "o.jsonl"],
            "synth agent",
            {"p": None},
            "--system-prompt p is a directory; give the prompt's text file",
        ),
        (
            [*SYNTH, "--system-prompt", "o.jsonl", "--out", "o.jsonl"],
            "synth agent",
            {"o.jsonl": b""},
            "--out o.jsonl is also an input (--system-prompt o.jsonl); choose another output path",
        ),
        (
            [*EVAL, "--system-prompt", "d/summary.json", "--out-dir", "d"],
            "eval agent",
            {"d": None},
            "--out-dir d/summary.json is also an input (--system-prompt d/summary.json); choose another output path",
        ),
    ],
    ids=[
        "out-is-a-directory",
        "tasks-without-ids",
        "prompt-missing",
        "prompt-directory",
        "prompt-is-out",
        "prompt-is-summary",
    ],
)
def test_run_options_fail_as_one_line(
    argv: list[str],
    command: str,
    files: dict[str, bytes | None],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, data in files.items():
        (tmp_path / name).mkdir() if data is None else (tmp_path / name).write_bytes(data)
    before = snapshot(tmp_path)
    assert main(argv) == 2
    assert one_line(capsys, command) == message
    assert snapshot(tmp_path) == before  # nothing written, nothing left behind


def test_a_bom_is_not_part_of_the_system_prompt(tmp_path: Path) -> None:
    (tmp_path / "plain.txt").write_text(PROMPT, encoding="utf-8")
    (tmp_path / "bom.txt").write_text(PROMPT, encoding="utf-8-sig")
    plans = [
        build_plan(RunSpec(domain="retail", agent="gold", split="train", tasks=("10",), system_prompt=tmp_path / name))
        for name in ("plain.txt", "bom.txt")
    ]
    assert plans[0][0].system == plans[1][0].system == PROMPT  # no U+FEFF in front of every row's prompt
    assert plans[0][1]["run"] == plans[1][1]["run"]


def test_a_failed_append_is_one_line_naming_the_log_with_the_resume_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = EpisodeLog.append

    def full_after_one(self: EpisodeLog, record: dict[str, Any]) -> None:
        if self.records():
            raise RunError(f"cannot append to the episode log {self.path}: No space left on device")
        real(self, record)

    monkeypatch.setattr(EpisodeLog, "append", full_after_one)
    out = tmp_path / "sft.jsonl"
    assert main([*SYNTH[:4], "--tasks", "10,50,24", "--workers", "1", "--no-progress", "--out", str(out)]) == 2
    log = tmp_path / "sft.episodes.jsonl"
    assert one_line(capsys, "synth agent") == (
        f"cannot append to the episode log {log}: No space left on device; 1 finished episode(s) are kept in "
        f"{log}; rerun the same command with --resume to run the rest"
    )
    assert not out.exists() and len(log.read_text().splitlines()) == 1


# --- a closed stdout ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["recipe", "list"], ["eval", "compare", "a.jsonl", "a.jsonl", "--boot", "10"]])
def test_a_closed_stdout_exits_quietly(argv: list[str], tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", run(A))
    proc = subprocess.Popen(
        [sys.executable, "-m", "rewardkit.cli", *argv],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -1` gone before the command writes: its output meets a broken pipe
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == ""  # 128 + SIGPIPE, as `yes | head -1` gives; no message
