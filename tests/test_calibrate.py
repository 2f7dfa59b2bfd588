"""``rewardkit calibrate think``: on the bundled teacher data, the proposed band is the percentiles computed by hand."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from rewardkit.cli import main
from rewardkit.recipes import EXAMPLES

TEACHER = EXAMPLES / "teacher_p1.jsonl"
THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def by_hand_lengths(count=len) -> list[int]:
    """Each teacher output's first think, stripped, measured by ``count``; rows without one are left out."""
    out = []
    for line in TEACHER.read_text(encoding="utf-8").splitlines():
        found = THINK.search(json.loads(line)["output"])
        if found and found.group(1).strip():
            out.append(count(found.group(1).strip()))
    return out


def percentile(values: list[int], p: float) -> float:
    """Linear interpolation between the order statistics: x[k] + (x[k+1] - x[k]) * frac, at k + frac = (n-1) p/100."""
    xs = sorted(values)
    position = (len(xs) - 1) * p / 100
    k, frac = int(position), position - int(position)
    return xs[k] + (xs[min(k + 1, len(xs) - 1)] - xs[k]) * frac


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *extra: str) -> tuple[str, dict]:
    report = tmp_path / "cal.json"
    capsys.readouterr()
    assert main(["calibrate", "think", str(TEACHER), "--json", str(report), *extra]) == 0
    return capsys.readouterr().out, json.loads(report.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("low", "high"), [(10, 90), (5, 95), (25, 75)])
def test_the_band_is_the_percentiles_by_hand(capsys, tmp_path: Path, low: int, high: int) -> None:
    lengths = by_hand_lengths()
    assert len(lengths) == 151  # 160 rows, 9 without a think
    want = (math.floor(percentile(lengths, low)), math.ceil(percentile(lengths, high)))
    out, report = run(capsys, tmp_path, "--low", str(low), "--high", str(high))
    assert (report["proposed"]["min"], report["proposed"]["max"]) == want
    assert f"think_length:\n  unit: chars\n  min: {want[0]}\n  max: {want[1]}\n" in out  # the YAML to paste
    # The share inside [P_low, P_high] is about high - low; the current band is the default config's [50, 300].
    inside = sum(want[0] <= n <= want[1] for n in lengths) / len(lengths)
    assert report["proposed"]["inside"] == pytest.approx(inside) and abs(inside - (high - low) / 100) < 0.03
    assert (report["current"]["min"], report["current"]["max"]) == (50, 300)
    assert report["current"]["inside"] == pytest.approx(sum(50 <= n <= 300 for n in lengths) / len(lengths))


def test_the_default_band_on_the_teacher_data(capsys, tmp_path: Path) -> None:
    # P10 of the 151 lengths is 38.0 and P90 360.x: the band [38, 361], which holds 121 of them (0.801).
    _, report = run(capsys, tmp_path)
    assert (report["proposed"]["min"], report["proposed"]["max"], report["rows"]) == (38, 361, 160)
    assert report["proposed"]["inside"] == pytest.approx(121 / 151)
    assert report["proposed"]["mean_reward"] > report["current"]["mean_reward"]  # fewer thinks fall off the curve


def test_tokens_of_a_tokenizer(capsys, tmp_path: Path, minilm_path: str) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(minilm_path, local_files_only=True)
    lengths = by_hand_lengths(lambda text: len(tok(text, add_special_tokens=False)["input_ids"]))
    want = (math.floor(percentile(lengths, 10)), math.ceil(percentile(lengths, 90)))
    out, report = run(capsys, tmp_path, "--tokenizer", minilm_path)
    assert report["unit"] == "tokens" and (report["proposed"]["min"], report["proposed"]["max"]) == want
    assert "unit: tokens" in out


def test_the_config_band_and_the_plot(capsys, tmp_path: Path) -> None:
    config = tmp_path / "rk.yaml"
    config.write_text("think_length:\n  min: 60\n  max: 90\n", encoding="utf-8")
    plot = tmp_path / "cal.png"
    out, report = run(capsys, tmp_path, "--config", str(config), "--plot", str(plot))
    assert (report["current"]["min"], report["current"]["max"]) == (60, 90)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"plot: {plot}" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--low", "90", "--high", "10"], "need 0 <= --low < --high <= 100"),
        (["--low", "nan"], "'nan' is not a finite number in [0, 100]"),
        (["--json", str(TEACHER)], "is also an input (DATA"),
    ],
)
def test_bad_flags_fail_in_one_line(capsys, args: list[str], message: str) -> None:
    try:
        code = main(["calibrate", "think", str(TEACHER), *args])
    except SystemExit as exc:  # argparse refuses a flag's value before the command runs
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_data_without_a_think_fails_naming_the_file(capsys, tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text('{"messages": [{"role": "assistant", "content": "no think here"}]}\n', encoding="utf-8")
    assert main(["calibrate", "think", str(data)]) == 2
    assert f"{data}: no row has a <think> block" in capsys.readouterr().err
