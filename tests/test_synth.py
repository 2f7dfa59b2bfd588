"""``rewardkit synth agent``: verified trajectories as ms-swift agent-format SFT rows.

The command runs as a user runs it (a subprocess on the real retail tasks); its rows then go
through ms-swift's own dataset loader and template encoder, and the loss mask is checked token
by token. ``select`` and ``sft_row`` are tested directly in ``test_trajectories.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _retail_gold import LEFT_OUT, SPLITS, rows_of
from sim_server import free_port

from rewardkit.envs import get_domain

DOMAIN = get_domain("retail")
# Left out, each said why (_retail_gold.py): a gold write that fails (gold_fails), or a gold that changes nothing and
# names nothing to show (no_evidence: doing nothing would complete it).
UNUSABLE = {tid: f"{reason}: " for tid, reason in LEFT_OUT.items() if tid in SPLITS["train"]}
TRAIN = rows_of("train")
N_TRAIN = len(TRAIN)
TOOLS_JSON = json.dumps(DOMAIN.tool_specs(), ensure_ascii=False)
ROLES = {"system", "user", "assistant", "tool_call", "tool"}


def synth_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rewardkit.cli", "synth", "agent", "--no-progress", *args]


def synth(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it: a subprocess."""
    return subprocess.run(synth_command(*args), cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def synth_here(capsys: pytest.CaptureFixture[str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The same command through ``rewardkit.cli.main`` in this process (a subprocess spends ~3 s importing);
    paths in ``args`` are relative to ``cwd``."""
    from rewardkit.cli import main

    absolute = [str(cwd / a) if a.endswith((".jsonl", ".json", ".txt")) else a for a in args]
    capsys.readouterr()
    code = main(["synth", "agent", "--no-progress", *absolute])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@dataclass(frozen=True)
class Run:
    dir: Path
    rows: list[dict[str, Any]]
    report: dict[str, Any]
    episodes: list[dict[str, Any]]
    stderr: str


def finished(cwd: Path, done: subprocess.CompletedProcess[str]) -> Run:
    assert done.returncode == 0, done.stderr
    report = json.loads((cwd / "report.json").read_text(encoding="utf-8"))
    return Run(cwd, read_jsonl(cwd / "sft.jsonl"), report, read_jsonl(cwd / "sft.episodes.jsonl"), done.stderr)


@dataclass(frozen=True)
class Started:
    dir: Path
    url: str
    proc: subprocess.Popen[str]


@pytest.fixture(scope="module")
def agent_down(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A run whose agent endpoint is down. Started before the gold run and left to finish alongside it:
    With --agent-retries 1 each request is tried twice (1 s of backoff), time this run spends asleep."""
    cwd = tmp_path_factory.mktemp("synth_agent_down")
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: every request is refused
    args = [
        "--agent",
        url,
        "--agent-model",
        "m",
        "--agent-retries",
        "1",
        "--tasks",
        "50,24",
        "--user-retries",
        "0",
        "--out",
        "sft.jsonl",
        "--report",
        "report.json",
    ]
    proc = subprocess.Popen(synth_command(*args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield Started(cwd, url, proc)
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def gold(tmp_path_factory: pytest.TempPathFactory, agent_down: Started) -> Run:
    """The gold agent and the scripted customer, twice over every train task."""
    cwd = tmp_path_factory.mktemp("synth_gold")
    done = synth(
        cwd,
        "--agent",
        "gold",
        "--user",
        "scripted",
        "--split",
        "train",
        "--trials",
        "2",
        "--out",
        "sft.jsonl",
        "--report",
        "report.json",
    )
    return finished(cwd, done)


# --- the gold run: counts --------------------------------------------------------------------------


def test_counts_reconcile_overall_and_per_task(gold: Run) -> None:
    report = gold.report
    assert report["read"] == N_TRAIN * 2 == len(gold.episodes)
    # Deterministic agent and customer: the second trial of every task repeats the first word for word.
    assert report["kept"] == N_TRAIN == len(gold.rows)
    assert report["rejected"] == {"duplicate": N_TRAIN}
    assert report["read"] == report["kept"] + sum(report["rejected"].values())
    assert sum(report["terminations"].values()) == report["read"]
    assert report["tasks_with_a_kept_episode"] == N_TRAIN
    assert set(report["per_task"]) == set(TRAIN)
    assert sorted(report["unusable_tasks"]) == sorted(UNUSABLE)
    assert all(report["unusable_tasks"][task].startswith(why) for task, why in UNUSABLE.items())
    for task_id, stats in report["per_task"].items():
        assert stats["attempted"] == 2 == stats["kept"] + sum(stats["rejected"].values()), task_id
        assert (stats["kept"], stats["rejected"]) == (1, {"duplicate": 1}), task_id
        assert sum(stats["terminations"].values()) == 2, task_id
    assert report["trials"] == 2 and report["tasks"] == N_TRAIN and report["agent"] == {"kind": "gold"}
    assert f"read {N_TRAIN * 2}  kept {N_TRAIN} ({N_TRAIN} of {N_TRAIN} tasks)" in gold.stderr
    assert "--resume" not in gold.stderr  # no infrastructure error to retry


def test_every_episode_is_logged_and_completes_its_task(gold: Run) -> None:
    keys = sorted((e["task_id"], e["trial"]) for e in gold.episodes)
    assert keys == sorted((t, k) for t in TRAIN for k in (0, 1))
    assert {(e["run"], e["status"], e["reward"]) for e in gold.episodes} == {(gold.report["run"], "ok", 1.0)}


# --- the gold run: rows ----------------------------------------------------------------------------


def test_rows_have_the_tools_column_and_agent_roles(gold: Run) -> None:
    for row in gold.rows:
        assert set(row) == {"messages", "tools"}
        assert row["tools"] == TOOLS_JSON and json.loads(row["tools"]) == DOMAIN.tool_specs()
        roles = [m["role"] for m in row["messages"]]
        assert set(roles) <= ROLES and roles[:2] == ["system", "user"], roles
        assert row["messages"][0]["content"] == DOMAIN.policy()
        assert roles.count("tool_call") == roles.count("tool")  # every call answered by its result
        # The conversation ends on the agent's last message, or on a successful transfer to a human agent
        # (the episode ends there: the row's last message is that tool's result).
        if roles[-1] != "assistant":
            assert roles[-2:] == ["tool_call", "tool"], roles
            assert json.loads(row["messages"][-2]["content"])["name"] in DOMAIN.stop_tools
        assert all(isinstance(m["content"], str) and m["content"] for m in row["messages"])


CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
EMPTY_THINK = "<think>\n\n</think>\n\n"  # the qwen3 template's empty think block before a reply without one
END = "<|im_end|>"


def assistant_turns(messages: Sequence[Mapping[str, str]]) -> list[tuple[list[str], list[Any]]]:
    """(texts, calls) of each assistant turn: a run of consecutive assistant and tool_call messages."""
    turns: list[tuple[list[str], list[Any]]] = []
    current: tuple[list[str], list[Any]] | None = None
    for m in messages:
        if m["role"] not in ("assistant", "tool_call"):
            current = None
            continue
        if current is None:
            current = ([], [])
            turns.append(current)
        if m["role"] == "assistant":
            current[0].append(m["content"])
        else:
            current[1].append(json.loads(m["content"]))
    return turns


def loss_spans(input_ids: Sequence[int], labels: Sequence[int], tokenizer: Any) -> list[str]:
    """The decoded runs of tokens that carry loss."""
    spans: list[list[int]] = []
    previous = -100
    for token, label in zip(input_ids, labels, strict=True):
        if label != -100:
            assert label == token  # unshifted labels: the model shifts them
            if previous == -100:
                spans.append([])
            spans[-1].append(token)
        previous = label
    return [tokenizer.decode(span) for span in spans]


def check_loss_spans(row: Mapping[str, Any], spans: list[str]) -> None:
    turns = assistant_turns(row["messages"])
    assert len(spans) == len(turns), (len(spans), len(turns))
    for span, (texts, calls) in zip(spans, turns, strict=True):
        body = span.removeprefix(EMPTY_THINK)
        assert body.endswith((END, END + "\n")), span
        body = body[: body.rindex(END)]
        assert [json.loads(block) for block in CALL.findall(body)] == calls, span
        assert CALL.sub("", body).strip() == "\n".join(texts).strip(), span
        assert END not in body and "<|im_start|>" not in body and "<tool_response>" not in body, span
    # Nothing the customer or a tool said is trained. Short tool results legitimately reappear on the
    # assistant side (a user id as a later call's argument, a computed total said to the customer); the
    # structural check above already pins every span exactly.
    said = [m["content"] for m in row["messages"] if m["role"] == "user"]
    said += [m["content"] for m in row["messages"] if m["role"] == "tool" and len(m["content"]) > 30]
    for text in said:
        assert not any(text in span for span in spans), text[:80]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3 whose tokenizer is trained on the policy and the tool specs; 16k positions, as a full
    policy + tools row is ~8-13k tokens and must not be truncated."""
    from rewardkit.pipelines.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", [DOMAIN.policy() + TOOLS_JSON], max_positions=16384)


def test_ms_swift_loads_and_encodes_every_row_with_loss_on_assistant_turns_only(
    gold: Run, tiny_model: Path, tmp_path: Path
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MODELSCOPE_CACHE", str(tmp_path / "cache"))  # swift's map cache, kept out of ~/.cache
        from swift.dataset import EncodePreprocessor, load_dataset
        from swift.model import get_processor
        from swift.template import get_template

        train, val = load_dataset([str(gold.dir / "sft.jsonl")], strict=True)
        assert val is None and len(train) == len(gold.rows) == N_TRAIN
        for loaded, row in zip(train, gold.rows, strict=True):
            assert [{"role": m["role"], "content": m["content"]} for m in loaded["messages"]] == row["messages"]
            assert loaded["tools"] == row["tools"]

        template = get_template(get_processor(str(tiny_model)))
        template.set_mode("train")
        # strict: a row the template cannot encode (too long, bad roles) raises instead of being dropped.
        encoded = EncodePreprocessor(template)(train, num_proc=1, strict=True, load_from_cache_file=False)
    assert len(encoded) == N_TRAIN
    lengths = [len(e["input_ids"]) for e in encoded]
    assert max(lengths) <= template.max_length == 16384
    for e, row in zip(encoded, gold.rows, strict=True):
        prompt = template.tokenizer.decode(e["input_ids"])
        assert '"name": "cancel_pending_order"' in prompt  # the tools column reached the prompt
        # Not truncated: the last message is whole (after a final tool result, ms-swift adds an empty
        # assistant prompt that carries no loss).
        last = row["messages"][-1]
        if last["role"] == "assistant":
            assert prompt.endswith(last["content"] + END + "\n")
        else:
            assert prompt.endswith(f"{last['content']}\n</tool_response>{END}\n<|im_start|>assistant\n{EMPTY_THINK}")
        check_loss_spans(row, loss_spans(e["input_ids"], e["labels"], template.tokenizer))


@pytest.mark.parametrize(
    ("option", "tools", "system"),
    [
        (["--no-tools"], False, None),
        (["--system-prompt", "prompt.txt"], True, "You are a terse retail agent. Follow the rules."),
    ],
    ids=["no-tools", "system-prompt"],
)
def test_no_tools_and_system_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], tools: bool, system: str | None
) -> None:
    if system is not None:
        (tmp_path / "prompt.txt").write_text(system, encoding="utf-8")
    done = synth_here(
        capsys,
        tmp_path,
        "--agent",
        "gold",
        "--tasks",
        "10,50",
        *option,
        "--out",
        "sft.jsonl",
        "--report",
        "report.json",
    )
    run = finished(tmp_path, done)
    assert run.report["kept"] == 2 and run.report["tools"] is tools
    for row in run.rows:
        assert ("tools" in row) is tools and (not tools or row["tools"] == TOOLS_JSON)
        assert row["messages"][0] == {"role": "system", "content": system or DOMAIN.policy()}
        assert sum(m["role"] == "system" for m in row["messages"]) == 1
    for episode in run.episodes:  # the agent saw the same system prompt
        assert episode["messages"][0]["content"] == (system or DOMAIN.policy())


# --- an agent endpoint that is down ----------------------------------------------------------------


def test_agent_endpoint_down_counts_agent_errors_and_suggests_resume(agent_down: Started) -> None:
    out, err = agent_down.proc.communicate(timeout=120)
    run = finished(agent_down.dir, subprocess.CompletedProcess([], agent_down.proc.returncode, out, err))
    url = agent_down.url
    assert run.rows == []
    assert (run.report["read"], run.report["kept"]) == (2, 0)
    assert run.report["rejected"] == {"agent_error": 2} and run.report["terminations"] == {"agent_error": 2}
    assert "task_failed" not in json.dumps(run.report)
    assert run.report["agent"]["base_url"] == url and run.report["agent"]["model"] == "m"
    assert {task: s["rejected"] for task, s in run.report["per_task"].items()} == {
        "24": {"agent_error": 1},
        "50": {"agent_error": 1},
    }
    assert "2 episode(s) hit an infrastructure error; rerun with --resume to retry them" in run.stderr
    for episode in run.episodes:
        assert (episode["status"], episode["reward"], episode["termination"]) == ("infra_error", None, "agent_error")
        assert f"agent endpoint {url}" in episode["error"] and "no reply after 2 attempt(s)" in episode["error"]


def test_agent_endpoint_down_without_a_model_name_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    done = synth_here(capsys, tmp_path, "--agent", url, "--tasks", "24", "--out", "sft.jsonl", "--report", "r.json")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rewardkit synth agent: agent endpoint")
    assert url in lines[0] and "cannot list its models" in lines[0] and "is the server up?" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, not even the episode log


def test_report_is_optional(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = synth_here(capsys, tmp_path, "--agent", "gold", "--tasks", "10", "--out", "sft.jsonl")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(read_jsonl(tmp_path / "sft.jsonl")) == 1
