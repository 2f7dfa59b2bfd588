"""Every report figure goes through ``rewardkit.files.figures``: a PNG, written whole, and a figure that cannot be
drawn fails as the user's input before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardkit.files.figures import PlotError, png, pyplot, write_png
from rewardkit.pipelines import agent_report, evidence, grpo_log

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_a_figure_is_png_bytes_and_its_file_is_written_whole(tmp_path: Path) -> None:
    fig, ax = pyplot().subplots()
    ax.plot([0, 1], [1, 0])
    data = png(fig, "a line")
    assert data.startswith(PNG_MAGIC)
    out = write_png(data, tmp_path / "line.png")
    assert out.read_bytes() == data and [p.name for p in tmp_path.iterdir()] == ["line.png"]  # no staging file left


def test_a_title_matplotlib_cannot_draw_is_the_users_and_writes_nothing(tmp_path: Path) -> None:
    fig, ax = pyplot().subplots()
    ax.set_title(r"cost $\notasymbol$")
    with pytest.raises(PlotError, match=r"(?s)cannot draw the test figure .*write \\\$ for a dollar sign"):
        png(fig, "the test figure")
    assert list(tmp_path.iterdir()) == []


# (the chains' report figures, each with the smallest input it draws)
STEP = {"global_step/max_steps": "1/2", "reward": 0.5, "rewards/StrictFormat/mean": 0.4}
CELLS = [f"{mode}_{split}" for mode in agent_report.MODES for split in agent_report.SPLITS]
SUMMARY = {
    "domain": "retail",
    "preset": "tiny",
    "models": {"sft": {cell: {"pass_hat_k": {"1": 0.25}} for cell in CELLS}},
    "grpo": {"grpo": {"task_completion": [0.1, 0.3]}},
}
FIGURES = [
    lambda out: evidence.bar_chart({"test": {"sft": {"mean": 0.5, "sd": 0.1, "values": [0.4, 0.6]}}}, "y", "t", out),
    lambda out: grpo_log.plot([STEP, {**STEP, "global_step/max_steps": "2/2"}], {1: 80.0, 2: 60.0}, out, "t", (50, 90)),
    lambda out: agent_report.plot(SUMMARY, out),
]


@pytest.mark.parametrize("draw", FIGURES, ids=["bar_chart", "grpo_curves", "agent_summary"])
def test_each_chain_figure_is_a_png(draw, tmp_path: Path) -> None:
    out = draw(tmp_path / "f.png")
    assert out == tmp_path / "f.png" and out.read_bytes().startswith(PNG_MAGIC)
