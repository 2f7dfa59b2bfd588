"""A few of a step's episodes as the trackers show them (rewardkit.loop.episode_sample), the reward's checks of a
dataset row as ms-swift hands it over (TaskCompletion.row_checks), and the trackers the diagnostics plugin writes to.

Real components only: the retail database behind the checks, TensorBoard's own writer and reader. The whole path, in
a real `swift rlhf` run reporting to TensorBoard and wandb, is tests/test_e2e_multi_turn.py's.
"""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import rewardkit.loop.episode_sample
from rewardkit.loop.episode_sample import markdown, sample_episodes, spread, table
from rewardkit.rewards import TaskCompletion


def test_the_docstring_examples_pass() -> None:
    result = doctest.testmod(rewardkit.loop.episode_sample)
    assert result.failed == 0 and result.attempted


@pytest.mark.parametrize(
    ("n", "k", "picked"),
    [
        (4, 4, [0, 1, 2, 3]),
        (8, 4, [0, 2, 4, 7]),
        (8, 2, [0, 7]),
        (8, 1, [0]),
        (3, 9, [0, 1, 2]),
        (5, 0, []),
        (0, 4, []),
    ],
)
def test_the_sample_is_spread_over_the_step(n: int, k: int, picked: list[int]) -> None:
    assert spread(n, k) == picked


STATE = "the final database equals the gold state"
SAID = "said 'refund'"

# (ending, TaskCompletion's score, its checks, the checks shown, the line that says why)
WHY = [
    ("user_stop", 1.0, [(STATE, True), (SAID, True)], ((STATE, True), (SAID, True)), "complete: every check passed"),
    (
        "user_stop",
        0.0,
        [(STATE, True), (SAID, False)],
        ((STATE, True), (SAID, False)),
        f"not complete: {SAID}: not met",
    ),
    (
        "agent_stop",
        0.0,
        [(STATE, False), (SAID, False)],
        ((STATE, False), (SAID, False)),
        f"not complete: {STATE}: not met (and 1 more)",
    ),
    (
        "max_turns",
        0.0,
        [(STATE, True)],
        ((STATE, True),),
        "no credit: it ended as max_turns; only a stop or a transfer earns credit",
    ),
    (  # left out: its checks are not asked for
        "user_sim_error",
        None,
        None,
        None,
        "left out of training: it ended as user_sim_error, the infrastructure's doing, not the agent's",
    ),
]


@pytest.mark.parametrize(("ending", "score", "checks", "shown", "why"), WHY)
def test_each_sampled_episode_says_why_it_scored_what_it_did(
    ending: str, score: float | None, checks: list | None, shown: tuple | None, why: str
) -> None:
    infos = [{"termination": ending, "turns": 3, "transcript": "user: hi\nassistant: bye"}]
    asked: list[int] = []

    def checks_of(i: int) -> list[tuple[str, bool]]:
        asked.append(i)
        assert checks is not None, "the checks of an episode left out were asked for"
        return checks

    rewards = {"TaskCompletion": [score], "UserSimFailure": [0.0]}
    (episode,) = sample_episodes(7, infos, rewards, 4, ("TaskCompletion", checks_of))
    assert (episode.checks, episode.why, episode.rewards) == (
        shown,
        why,
        {"TaskCompletion": score, "UserSimFailure": 0},
    )
    assert asked == ([] if checks is None else [0])
    text = markdown([episode])
    assert f"**why:** {why}" in text and "    user: hi\n    assistant: bye" in text
    assert all(f"- {'✓' if ok else '✗'} {name}" in text for name, ok in shown or ())


def test_what_is_sampled_and_what_each_tracker_gets() -> None:
    # Eight rows: one without a live record (offline data) is passed over; a reward that scored other rows is left
    # out; a NaN (ms-swift's None) is no score.
    infos: list[Any] = [{"termination": "user_stop", "turns": i, "transcript": f"assistant: {i}"} for i in range(8)]
    infos[2] = None
    rewards = {"TaskCompletion": [1.0, 0.0, 1.0, float("nan"), 0.0, 1.0, 0.0, 1.0], "Other": [1.0]}
    shown = sample_episodes(3, infos, rewards, 3)
    assert [e.index for e in shown] == [0, 4, 7]  # spread over the seven live ones
    assert [e.rewards for e in shown] == [{"TaskCompletion": 1.0}, {"TaskCompletion": 0.0}, {"TaskCompletion": 1.0}]
    assert all(e.checks is None and e.why is None for e in shown)  # no reward of the run explains
    assert sample_episodes(3, infos, {"TaskCompletion": rewards["TaskCompletion"]}, 8)[2].rewards == {
        "TaskCompletion": None
    }
    columns, rows = table(shown)
    assert columns == [
        "step",
        "episode",
        "reward/TaskCompletion",
        "termination",
        "turns",
        "why",
        "checks",
        "transcript",
    ]
    assert rows[1] == [3, 4, 0.0, "user_stop", 4, "", "", "assistant: 4"]
    first = "### step 3, episode 0: TaskCompletion 1; user_stop, 0 turns\n\n**transcript:**\n\n    assistant: 0"
    assert markdown(shown).startswith(first)
    assert sample_episodes(3, [None, {"turns": 2}], {}, 4) == []  # no live episode: nothing to show


CANCEL = {"order_id": "#W6779827", "reason": "no longer needed"}
TASK = {
    "evaluation_criteria": {
        "actions": [{"name": "cancel_pending_order", "arguments": CANCEL}],
        "communicate_info": ["refund"],
    }
}
CALL = {"role": "assistant", "content": json.dumps({"name": "cancel_pending_order", "arguments": CANCEL})}
CALL = {**CALL, "content": f"<tool_call>{CALL['content']}</tool_call>"}
TOLD = {"role": "assistant", "content": "Cancelled; the refund is on its way."}
SILENT = {"role": "assistant", "content": "Cancelled."}


@pytest.mark.parametrize(
    ("messages", "task", "missed"),
    [
        ([CALL, TOLD], TASK, []),
        ([CALL, SILENT], json.dumps(TASK), ["said 'refund'"]),  # the task cell as JSON, as a dataset holds it
        (json.dumps([TOLD]), TASK, [STATE]),  # and the messages
    ],
)
def test_the_rewards_checks_of_a_row_as_the_trainer_hands_it_over(messages: Any, task: Any, missed: list[str]) -> None:
    reward = TaskCompletion()
    checks = reward.row_checks(messages, task, "retail")
    assert [name for name, ok in checks if not ok] == missed
    assert STATE in dict(checks)
    rows = {"messages": [messages], "task": [task], "domain": ["retail"]}
    assert reward([""], **rows) == [0.0 if missed else 1.0]  # all met: the score's 1


def plugin() -> Any:
    import rewardkit.plugins.diagnostics as diagnostics  # ms-swift's

    return diagnostics


@pytest.mark.parametrize(
    ("report_to", "kinds"),
    [
        ([], []),
        (["none"], []),
        (["tensorboard"], ["TensorBoard"]),
        (["wandb"], ["function"]),
        (["tensorboard", "wandb"], ["TensorBoard", "function"]),
    ],
)
def test_only_the_trackers_asked_for_get_episodes(report_to: list[str], kinds: list[str], tmp_path: Path) -> None:
    args = SimpleNamespace(report_to=report_to, logging_dir=str(tmp_path), output_dir=str(tmp_path))
    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[]))
    assert [type(t).__name__ for t in plugin().trackers(args, trainer)] == kinds


def test_tensorboard_without_the_trainers_writer_writes_in_its_log_folder(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    args = SimpleNamespace(report_to=["tensorboard"], logging_dir=str(tmp_path / "runs"), output_dir=str(tmp_path))
    (board,) = plugin().trackers(args, SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[])))
    infos = [{"termination": "user_stop", "turns": 1, "transcript": "assistant: done"}]
    for step in (1, 2):
        board(step, sample_episodes(step, infos, {"TaskCompletion": [1.0]}, 4))
    board.own.close()
    (path,) = (tmp_path / "runs").glob("events.out.tfevents.*")
    events = EventAccumulator(str(path), size_guidance={"tensors": 0})
    events.Reload()
    texts = {
        e.step: tensor_util.make_ndarray(e.tensor_proto).item().decode()
        for e in events.Tensors("rewardkit/episodes/text_summary")
    }
    assert sorted(texts) == [1, 2] and texts[2].startswith(
        "### step 2, episode 0: TaskCompletion 1; user_stop, 1 turns"
    )


@pytest.mark.parametrize(
    ("termination", "transcript", "score", "heading", "body"),
    [
        # A newline in the ending cannot open a heading of its own: whitespace collapses to one line.
        ("user_stop\n# injected", "user: hi", 1.0, "TaskCompletion 1; user_stop # injected, 1 turns", "    user: hi"),
        # A lone surrogate is replaced ('?'), so no tracker's UTF-8 writer fails on it.
        ("user_stop", "user: \ud800", 1.0, "user_stop, 1 turns", "    user: ?"),
        # A score that is not a number reads as none, never an exception.
        ("user_stop", "user: hi", "high", "TaskCompletion none; user_stop", "    user: hi"),
        # 50,000 characters show as 20,000: 10,000 either side of a line saying what was cut.
        (
            "user_stop",
            "x" * 50_000,
            1.0,
            "user_stop, 1 turns",
            "    " + "x" * 10_000 + "\n    … 30000 characters cut …",
        ),
    ],
)
def test_hostile_episodes_show_as_one_heading_and_a_bounded_block(termination, transcript, score, heading, body):
    infos = [{"termination": termination, "turns": 1, "transcript": transcript}]
    (episode,) = sample_episodes(2, infos, {"TaskCompletion": [score]}, 4)
    text = markdown([episode])
    assert text.count("\n### ") == 0 and heading in text.splitlines()[0]
    assert body in text and len(text) < 21_000
    text.encode("utf-8")  # raises on a lone surrogate
