"""`rewardkit audit` and `rewardkit view` on run folders and episode logs that are damaged or hostile.

Every problem in a run folder is one line naming ``file:line`` (or ``file:``) and the key, exit 2; no output lands
over an input; what is written is strict JSON; and text in an episode cannot end, comment out or run a script in the
page (the page itself, in a browser, is in tests/test_viewer_browser.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.cli import main
from rewardkit.files.jsonl import loads_strict
from rewardkit.runs.viewer.page import MARKER, embed, render

ARGS = {"reward_funcs": ["json_valid", "expert_match"], "reward_weights": [1.0, 0.5], "num_generations": 2}
TABLE = {
    "step": ["1"] * 4,
    "prompt": ["p"] * 4,
    "completion": ["c"] * 4,
    "JsonValid": [1, 0, 1, 1],
    "ExpertMatch": [1, 1, None, 0],
}


def run_folder(folder: Path, args: Any = None, tables: Any = None, raw: str | None = None) -> Path:
    """args.json, an empty logging.jsonl and completions.jsonl (``raw`` text, or one line per table)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "args.json").write_text(json.dumps(ARGS if args is None else args), encoding="utf-8")
    (folder / "logging.jsonl").write_text("", encoding="utf-8")
    lines = raw if raw is not None else "".join(json.dumps(t) + "\n" for t in (tables or [TABLE]))
    (folder / "completions.jsonl").write_text(lines, encoding="utf-8")
    return folder


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rewardkit {argv[0]}: "), err
    return err


# -- audit: outputs over inputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["args.json", "completions.jsonl", "logging.jsonl", "rollouts.jsonl", "config.yaml"])
def test_audit_never_writes_over_what_it_reads(tmp_path: Path, capsys, name: str) -> None:
    folder = run_folder(tmp_path / "run")
    (folder / "rollouts.jsonl").write_text("", encoding="utf-8")
    (folder / "config.yaml").write_text("think_length:\n  unit: chars\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    err = one_line_error(
        capsys, ["audit", str(folder), "--config", str(folder / "config.yaml"), "--json", str(folder / name)]
    )
    assert f"--json {folder / name} is also an input" in err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing written, not even audit/


def test_audit_outputs_are_checked_together_before_anything_is_written(tmp_path: Path, capsys) -> None:
    folder = run_folder(tmp_path / "run")
    err = one_line_error(capsys, ["audit", str(folder), "--json", str(folder / "audit" / "audit.md")])
    assert "is the same file as --out" in err and not (folder / "audit").exists()
    err = one_line_error(capsys, ["audit", str(folder), "--json", str(folder / "args.json" / "x.json")])
    assert "is not a directory" in err and not (folder / "audit").exists()


def test_view_never_writes_over_the_runs_files(tmp_path: Path, capsys) -> None:
    folder = run_folder(tmp_path / "run")
    before = (folder / "args.json").read_bytes()
    err = one_line_error(capsys, ["view", str(folder), "--out", str(folder / "args.json")])
    assert "is also an input" in err and (folder / "args.json").read_bytes() == before


# -- audit and view: malformed run folders ----------------------------------------------------------------------


def _args(**change: Any) -> dict[str, Any]:
    return {**ARGS, **change}


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (_args(reward_weights=["x", 1]), "args.json: reward_weights[0]"),
        (_args(reward_weights=[[1], 1]), "args.json: reward_weights[0]"),
        (_args(reward_weights=[1, {"a": 1}]), "args.json: reward_weights[1]"),
        (_args(reward_weights=[1, None]), "args.json: reward_weights[1]"),
        (_args(reward_weights=[1, "nan"]), "args.json: reward_weights[1]"),
        (_args(reward_weights=[1, True]), "args.json: reward_weights[1]"),
        (_args(reward_weights=[1, 1e300]), "args.json: reward_weights[1]"),
        (_args(reward_weights=[1]), "args.json: reward_weights"),
        (_args(reward_weights="1,1"), "args.json: reward_weights"),
        (_args(num_generations="two"), "args.json: num_generations"),
        (_args(num_generations=1.5), "args.json: num_generations"),
        (_args(num_generations=None), "args.json: num_generations"),
        (_args(reward_funcs="json_valid"), "args.json: reward_funcs"),
        (_args(reward_funcs=[["json_valid"]]), "args.json: reward_funcs"),
        ([1, 2], "args.json: "),
    ],
)
@pytest.mark.parametrize("command", ["audit", "view"])
def test_a_bad_args_json_is_one_line(tmp_path: Path, capsys, command: str, args: Any, where: str) -> None:
    folder = run_folder(tmp_path / "run", args=args)
    assert f"{folder / where}" in one_line_error(capsys, [command, str(folder)])


def _table(**change: Any) -> dict[str, Any]:
    return {**TABLE, **change}


@pytest.mark.parametrize(
    ("tables", "where"),
    [
        ([_table(JsonValid=[1, "x", 1, 1])], ":1: column 'JsonValid'[1]"),
        ([_table(JsonValid=[1, [0], 1, 1])], ":1: column 'JsonValid'[1]"),
        ([_table(JsonValid=[1, {"a": 0}, 1, 1])], ":1: column 'JsonValid'[1]"),
        ([_table(JsonValid=[1, True, 1, 1])], ":1: column 'JsonValid'[1]"),
        ([TABLE, _table(ExpertMatch=None)], ":2: column 'ExpertMatch'"),
        ([_table(ExpertMatch="1,1,1,1")], ":1: column 'ExpertMatch'"),
        ([_table(ExpertMatch={"0": 1})], ":1: column 'ExpertMatch'"),
        ([_table(completion=["c"] * 3)], ":1: column 'completion'"),  # shorter than the reward columns
        ([_table(prompt=["p"] * 5)], ":1: column 'prompt'"),
        ([_table(prompt="p")], ":1: column 'prompt'"),
        ([_table(num_turns=[1, 2, "x", 1])], ":1: column 'num_turns'[2]"),
        ([_table(num_turns=[1, 2])], ":1: column 'num_turns'"),
        ([_table(step=["one"] * 4)], ":1: column 'step'"),
        ([_table(step="1")], ":1: column 'step'"),
        ([{k: v for k, v in TABLE.items() if k != "completion"}], ":1: no column ['completion']"),
        ([{k: v for k, v in TABLE.items() if k != "step"}], ":1: no column ['step']"),
        ([{**{k: [] for k in TABLE}}], ":1: no completion"),
    ],
)
@pytest.mark.parametrize("command", ["audit", "view"])
def test_a_bad_completions_table_is_one_line(tmp_path: Path, capsys, command: str, tables: list, where: str) -> None:
    folder = run_folder(tmp_path / "run", tables=tables)
    assert f"{folder / 'completions.jsonl'}{where}" in one_line_error(capsys, [command, str(folder)])


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (
            '{"step": ["1", "1"], "prompt": ["p", "p"], "completion": ["c", "c"], "JsonValid": [1, Infinity], '
            '"ExpertMatch": [1, 1]}\n',
            ":1: column 'JsonValid'[1]",
        ),
        (
            '{"step": ["1", "1"], "prompt": ["p", "p"], "completion": ["c", "c"], "JsonValid": [1, 1e999], '
            '"ExpertMatch": [1, 1]}\n',
            ":1: column 'JsonValid'[1]",
        ),
        ("", ": no logged step"),
        ("[1, 2]\n", ":1: expected a JSON object per line"),
    ],
    ids=["infinity", "overflow", "empty", "not-an-object"],
)
def test_non_finite_rewards_and_empty_logs_are_one_line(tmp_path: Path, capsys, raw: str, where: str) -> None:
    folder = run_folder(tmp_path / "run", raw=raw)
    assert f"{folder / 'completions.jsonl'}{where}" in one_line_error(capsys, ["audit", str(folder)])


def test_nan_is_how_ms_swift_logs_a_none_reward(tmp_path: Path) -> None:
    from rewardkit.runs.training.audit import load_run

    nan = run_folder(tmp_path / "nan", raw=json.dumps(TABLE).replace("null", "NaN") + "\n")
    null = run_folder(tmp_path / "null")
    assert (load_run(nan).steps[0].scores.tobytes()) == load_run(null).steps[0].scores.tobytes()


GOOD_ROLLOUT = {
    "step": 1,
    "episodes": 2,
    "terminations": {"user_stop": 2},
    "excluded": 0,
    "turns": [2, 2],
    "tools": {"get_order": {"calls": 2, "errors": 0}},
    "tool_errors": 0,
    "policy_tokens": {"mean": 5.0, "max": 6},
    "ledger": [
        {
            "role": "user",
            "endpoint": "http://x/v1",
            "requests": 1,
            "retries": 0,
            "failures": 0,
            "cache_hits": 0,
            "errors": 0,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "latency_s": {"p50": 0.1, "p90": 0.1, "p99": 0.1},
        }
    ],
}


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"step": "1"}, ":1: 'step'"),
        ({"episodes": "2"}, ":1: 'episodes'"),
        ({"terminations": ["user_stop"]}, ":1: 'terminations'"),
        ({"tools": {"get_order": {"calls": "2", "errors": 0}}}, ":1: 'tools'"),
        ({"tools": {"get_order": 2}}, ":1: 'tools'"),
        ({"ledger": [{"role": "user"}]}, ":1: 'ledger'"),
        ({"ledger": {"role": "user"}}, ":1: 'ledger'"),
        ({"ledger": [{**GOOD_ROLLOUT["ledger"][0], "latency_s": {"p50": "fast", "p99": 0.1}}]}, ":1: 'ledger'"),
    ],
)
def test_a_bad_rollouts_line_is_one_line(tmp_path: Path, capsys, change: dict, where: str) -> None:
    folder = run_folder(tmp_path / "run")
    (folder / "rollouts.jsonl").write_text(json.dumps({**GOOD_ROLLOUT, **change}) + "\n", encoding="utf-8")
    assert f"{folder / 'rollouts.jsonl'}{where}" in one_line_error(capsys, ["audit", str(folder)])


def test_a_good_rollouts_line_is_read(tmp_path: Path) -> None:
    folder = run_folder(tmp_path / "run")
    (folder / "rollouts.jsonl").write_text(json.dumps(GOOD_ROLLOUT) + "\n", encoding="utf-8")
    assert main(["audit", str(folder), "--json", str(tmp_path / "a.json")]) == 0
    report = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert report["steps"][0]["episodes"]["tools"] == GOOD_ROLLOUT["tools"] and report["ledger"][0]["requests"] == 1


def test_audit_json_is_strict_json(tmp_path: Path, capsys) -> None:
    # JsonValid [1e308, -1e308]: its mean is 0 but its std overflows, and so does every total's variance: figures
    # that are not finite are written as null, never as Infinity or NaN.
    big = _table(JsonValid=[1e308, -1e308, 1e308, -1e308])
    folder = run_folder(tmp_path / "run", tables=[big])
    report = tmp_path / "audit.json"
    assert main(["audit", str(folder), "--json", str(report)]) == 0
    figures = loads_strict(report.read_text(encoding="utf-8"))
    assert figures["steps"][0]["rewards"]["JsonValid"]["std"] is None
    assert figures["steps"][0]["rewards"]["JsonValid"]["mean"] == 0.0


# -- audit --step-check: damaged checkpoints ---------------------------------------------------------------------

TENSORS = {"a": [1.0, 2.0], "b": [[1.0, 2.0], [3.0, 4.0]]}


def checkpoint(folder: Path, tensors: dict[str, Any] = TENSORS, dtype: str = "bfloat16", shards: int = 1) -> Path:
    """A checkpoint as ms-swift saves it: config.json and the tensors in one model.safetensors, or in shards with
    their index (a tensor's value may be a (values, dtype) pair)."""
    import torch
    from safetensors.torch import save_file

    def tensor(value: Any) -> Any:
        values, kind = value if isinstance(value, tuple) else (value, dtype)
        return torch.tensor(values, dtype=getattr(torch, kind))

    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    if shards == 1:
        save_file({n: tensor(v) for n, v in tensors.items()}, folder / "model.safetensors")
        return folder
    names, weight_map = sorted(tensors), {}
    for i in range(shards):
        shard = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensor(tensors[n]) for n in names[i::shards]}, folder / shard)
        weight_map.update(dict.fromkeys(names[i::shards], shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}), encoding="utf-8")
    return folder


# Each damage, done to a run whose starting model (args.json's model) is `base` and whose checkpoints are
# checkpoint-1 and checkpoint-2 (bfloat16 a [2] and b [2, 2], checkpoint-2 in two shards: a in the first, b in the
# second); it returns what the one line must say. The file is named, and the tensor where one is at fault.
def _cut(path: Path, keep: slice) -> Path:
    path.write_bytes(path.read_bytes()[keep])
    return path


def truncated(run: Path) -> str:  # a copy stopped half-way
    return f"{_cut(run / 'checkpoint-1' / 'model.safetensors', slice(0, 40))}: not a readable safetensors file"


def short_by_two_bytes(run: Path) -> str:  # the header is whole, the data is not
    return f"{_cut(run / 'checkpoint-1' / 'model.safetensors', slice(0, -2))}: not a readable safetensors file"


def garbage(run: Path) -> str:
    shard = run / "checkpoint-2" / "model-00002-of-00002.safetensors"
    shard.write_bytes(bytes(range(256)) * 4)
    return f"{shard}: not a readable safetensors file"


def empty(run: Path) -> str:
    return f"{_cut(run / 'checkpoint-1' / 'model.safetensors', slice(0, 0))}: not a readable safetensors file"


def missing_shard(run: Path) -> str:  # the index names a file that is not there
    shard = run / "checkpoint-2" / "model-00002-of-00002.safetensors"
    shard.unlink()
    return f"{shard}: not a readable safetensors file (No such file or directory"


def missing_file(run: Path) -> str:
    (run / "checkpoint-1" / "model.safetensors").unlink()
    return f"{run / 'checkpoint-1'}: no model.safetensors (or its index)"


def bad_index(run: Path) -> str:
    index = run / "checkpoint-2" / "model.safetensors.index.json"
    index.write_text('{"weight_map": ', encoding="utf-8")
    return f"{index}: not a safetensors index (JSONDecodeError"


def index_without_a_map(run: Path) -> str:
    index = run / "checkpoint-2" / "model.safetensors.index.json"
    index.write_text('{"weight_map": ["a", "b"]}', encoding="utf-8")
    return f"{index}: 'weight_map' must map each tensor name to its shard's file name"


def misplaced_tensor(run: Path) -> str:  # the index places b in the shard that holds a
    index = run / "checkpoint-2" / "model.safetensors.index.json"
    shard = "model-00001-of-00002.safetensors"
    index.write_text(json.dumps({"weight_map": {"a": shard, "b": shard}}), encoding="utf-8")
    return f"{run / 'checkpoint-2' / shard}: no tensor 'b', which model.safetensors.index.json places there"


def wrong_shape(run: Path) -> str:  # numpy would broadcast b's 4 values against 3, or fail
    shutil.rmtree(run / "checkpoint-2")
    checkpoint(run / "checkpoint-2", {**TENSORS, "b": [1.0, 2.0, 3.0]})
    first = run / "checkpoint-1" / "model.safetensors"
    return f"{run / 'checkpoint-2' / 'model.safetensors'}: tensor 'b' is BF16 [3], but BF16 [2, 2] in {first}"


def wrong_dtype(run: Path) -> str:  # one trainer saves every checkpoint in one dtype
    shutil.rmtree(run / "checkpoint-2")
    checkpoint(run / "checkpoint-2", {**TENSORS, "a": ([1.0, 2.0], "float16")})
    first = run / "checkpoint-1" / "model.safetensors"
    return f"{run / 'checkpoint-2' / 'model.safetensors'}: tensor 'a' is F16 [2], but BF16 [2] in {first}"


def missing_tensor(run: Path) -> str:
    shutil.rmtree(run / "checkpoint-2")
    checkpoint(run / "checkpoint-2", {"a": TENSORS["a"]})
    return f"{run / 'checkpoint-2'}: no tensor 'b', which {run / 'checkpoint-1'} holds"


def base_of_another_shape(run: Path) -> str:  # the starting model may differ in dtype, never in shape
    base = run.parent / "base"
    shutil.rmtree(base)
    checkpoint(base, {"a": ([1.0, 2.0, 3.0], "float32"), "b": TENSORS["b"]})
    return f"{base / 'model.safetensors'}: tensor 'a' is F32 [3], but BF16 [2] in {run / 'checkpoint-1'}"


def unreadable_config(run: Path) -> str:  # the weights are whole; transformers cannot read the config
    (run / "checkpoint-1" / "config.json").write_bytes(b"\x00{")
    return f"{run / 'checkpoint-1'}: transformers cannot load it (OSError: It looks like the config file at"


def _header_bytes(header: bytes) -> bytes:  # safetensors: the header's length (8 bytes, little-endian), then it
    return len(header).to_bytes(8, "little") + header


def terabyte_tensor(run: Path) -> str:  # a header that claims 2**40 bytes of data the 16-byte file lacks
    path = run / "checkpoint-1" / "model.safetensors"
    path.write_bytes(_header_bytes(b'{"a":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}}'))
    return f"{path}: not a readable safetensors file"


def huge_header(run: Path) -> str:  # 100 MB of JSON header: refused by its size, never parsed into memory
    path = run / "checkpoint-1" / "model.safetensors"
    path.write_bytes(_header_bytes(b'{"__metadata__":{"x":"' + b"x" * 100_000_000 + b'"}}'))
    return f"{path}: not a readable safetensors file"


def symlink_loop(run: Path) -> str:  # the file links to itself
    path = run / "checkpoint-1" / "model.safetensors"
    path.unlink()
    path.symlink_to(path)
    return f"{run / 'checkpoint-1'}: no model.safetensors (or its index)"


def index_not_utf8(run: Path) -> str:
    index = run / "checkpoint-2" / "model.safetensors.index.json"
    index.write_bytes(b'{"weight_map": {"a": "\xff\xfe"}}')  # latin-1 bytes, as a non-UTF-8 editor saves
    return f"{index}: not a safetensors index (UnicodeDecodeError"


def shard_outside_the_folder(run: Path) -> str:  # the index names a shard of another checkpoint, by ../
    index = run / "checkpoint-2" / "model.safetensors.index.json"
    shard = "../checkpoint-1/model.safetensors"
    index.write_text(json.dumps({"weight_map": {"a": shard, "b": shard}}), encoding="utf-8")
    return f"{index}: shard {shard!r} is not a file name in {run / 'checkpoint-2'}"


DAMAGES = [
    terabyte_tensor,
    huge_header,
    symlink_loop,
    index_not_utf8,
    shard_outside_the_folder,
    truncated,
    short_by_two_bytes,
    garbage,
    empty,
    missing_shard,
    missing_file,
    bad_index,
    index_without_a_map,
    misplaced_tensor,
    wrong_shape,
    wrong_dtype,
    missing_tensor,
    base_of_another_shape,
    unreadable_config,
]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__)
def test_a_damaged_checkpoint_is_one_line_naming_the_file(tmp_path: Path, capsys, damage: Any) -> None:
    base = checkpoint(tmp_path / "base", {"a": ([1.0, 2.0], "float32"), "b": TENSORS["b"]})  # another dtype: fine
    run = run_folder(tmp_path / "run", args=_args(model=str(base)))
    checkpoint(run / "checkpoint-1")
    checkpoint(run / "checkpoint-2", {"a": [2.0, 3.0], "b": [[2.0, 3.0], [4.0, 5.0]]}, shards=2)
    where = damage(run)
    err = one_line_error(capsys, ["audit", str(run), "--step-check"])
    assert where in err, err
    assert "remove its folder to skip the steps it serves" in err  # and how to fix it
    assert not (run / "audit").exists()


def test_whole_checkpoints_pass_the_check_as_one_model(tmp_path: Path) -> None:
    from rewardkit.runs.training.step_check import checked_weights

    # The starting model in float32 beside the run's bfloat16, and with a tensor the trainer does not save (a tied
    # weight): what all three share is read.
    base = checkpoint(tmp_path / "base", {**TENSORS, "tied": [0.0]}, dtype="float32")
    saved = {0: base, 1: checkpoint(tmp_path / "1"), 2: checkpoint(tmp_path / "2", shards=2)}
    maps = checked_weights(saved)
    assert {n: sorted(m) for n, m in maps.items()} == {0: ["a", "b", "tied"], 1: ["a", "b"], 2: ["a", "b"]}
    assert (maps[0]["b"].dtype, maps[2]["b"].shape, maps[2]["b"].file.name) == (
        "F32",
        (2, 2),
        "model-00002-of-00002.safetensors",
    )


# -- view: episode logs -----------------------------------------------------------------------------------------


def _episode(task: str = "0", trial: int = 0, **change: Any) -> dict[str, Any]:
    record = {
        "run": "r",
        "task_id": task,
        "trial": trial,
        "status": "ok",
        "reward": 0.0,
        "termination": "user_stop",
        "turns": 1,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}],
    }
    return {**record, **change}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"run": "r", "task_id": "0", "trial": 0, "status": "ok", "reward": NaN, "messages": []}',
            ":2: not valid JSON (NaN is not valid JSON)",
        ),
        (
            '{"run": "r", "task_id": "0", "trial": 0, "status": "ok", "reward": Infinity, "messages": []}',
            ":2: not valid JSON (Infinity is not valid JSON)",
        ),
        (json.dumps(_episode(reward="1.0")), ":2: not an episode record (an ok episode needs a numeric 'reward'"),
        (json.dumps(_episode(reward=[1])), ":2: not an episode record (an ok episode needs a numeric 'reward'"),
        (json.dumps(_episode(trial="x")), ":2: not an episode record ('trial' must be"),
        (json.dumps({k: v for k, v in _episode().items() if k != "trial"}), ":2: not an episode record ("),
        (json.dumps(_episode(messages={"role": "user"})), ":2: not an episode record ('messages' must be"),
        (json.dumps(_episode(messages=["hi"])), ":2: not an episode record ('messages' must be"),
        (json.dumps(_episode(gates={"requested": "x"})), ":2: not an episode record ('gates' must be"),
        (json.dumps(_episode(notes={"a": 1})), None),  # an unknown field is not a problem
    ],
)
def test_a_bad_episode_line_is_one_line(tmp_path: Path, capsys, line: str, message: str | None) -> None:
    log = tmp_path / "episodes.jsonl"
    log.write_text(json.dumps(_episode("1")) + "\n" + line + "\n", encoding="utf-8")
    argv = ["view", str(log), "--domain", "retail"]
    if message is None:
        assert main(argv) == 0
    else:
        assert f"{log}{message}" in one_line_error(capsys, argv)


def test_a_synth_log_names_no_domain(tmp_path: Path, capsys) -> None:
    log = tmp_path / "sft.episodes.jsonl"
    log.write_text(json.dumps(_episode()) + "\n", encoding="utf-8")
    err = one_line_error(capsys, ["view", str(log)])
    assert f"{log} records no domain" in err and "--domain" in err and not (tmp_path / "view.html").exists()
    assert main(["view", str(log), "--domain", "retail"]) == 0


@pytest.mark.parametrize("summary", ["{", "[1]", '{"domain": 3}', '{"run": "r"}'])
def test_a_bad_summary_is_named(tmp_path: Path, capsys, summary: str) -> None:
    (tmp_path / "episodes.jsonl").write_text(json.dumps(_episode()) + "\n", encoding="utf-8")
    (tmp_path / "summary.json").write_text(summary, encoding="utf-8")
    assert f"{tmp_path / 'summary.json'}" in one_line_error(capsys, ["view", str(tmp_path)])


def test_view_finds_the_domain_an_eval_ran_on_by_its_path(tmp_path: Path) -> None:
    from rewardkit.envs.registry import new_domain

    domain = tmp_path / "shelf"
    new_domain("viewed_shelf", domain)  # a name of its own: a process registers each domain name once
    out = tmp_path / "eval"
    argv = ["eval", "agent", "--domain", str(domain), "--agent", "gold", "--user", "scripted", "--split", "test"]
    assert main([*argv, "--out-dir", str(out), "--no-progress"]) == 0
    # A new process, where nothing has loaded the domain yet (and whose folder holds no "shelf" to take for a
    # path): only what the run recorded can find it. Given the log's file, not its folder, the summary beside it
    # is read all the same.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for target in (out, out / "episodes.jsonl"):
        command = [sys.executable, "-m", "rewardkit.cli", "view", str(target)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=elsewhere, timeout=120)
        assert done.returncode == 0, done.stderr
        data = embedded(out / "view.html")
        assert data["domain"] == "viewed_shelf" and data["summary"]["passed"] == data["summary"]["episodes"] == 12


# -- the page ---------------------------------------------------------------------------------------------------

HOSTILE = [
    "<!--<script>",
    "</script><script>window.pwned=1</script>",
    "<img src=x onerror=window.pwned=1>",
    "]]>",
    "a\u2028b\u2029c",
    "lone \ud800 surrogate",
    "&lt;not an entity",
    "__TITLE__",
    MARKER,
    "</SCRIPT >",
]


def embedded(page_path: Path) -> Any:
    page = page_path.read_text(encoding="utf-8")
    return json.loads(page.split('<script id="data" type="application/json">', 1)[1].split("</script>", 1)[0])


def _view(text: str) -> dict[str, Any]:
    return {
        "title": f"title {text}",
        "run": text,
        "domain": "retail",
        "review": False,
        "summary": {},
        "tasks": {text: {}},
        "systems": [text],
        "episodes": [{"id": text, "messages": [{"role": "user", "content": text}]}],
    }


@pytest.mark.parametrize("text", HOSTILE)
def test_the_embedded_data_holds_no_markup_and_reads_back_whole(text: str) -> None:
    page = render(_view(text)).decode("utf-8")  # UTF-8 throughout: a lone surrogate is escaped
    data = page.split('<script id="data" type="application/json">', 1)[1].split("</script>", 1)[0]
    assert not set(data) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(data) == _view(text)  # every field as it was (the title included), nothing substituted in
    assert page.count("<script") == 2 and page.count("</script>") == 2


def test_the_policy_allows_only_the_pages_own_script() -> None:
    page = render(_view("t")).decode("utf-8")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    script = re.search(r"<script>(.*?)</script>", page, re.DOTALL).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    assert directives["script-src"] == f"'sha256-{digest}'" and "unsafe" not in policy
    assert not re.search(r"\son[a-z]+\s*=", page.split("<script>", 1)[0])  # no inline handler in the markup


MARKUP = st.sampled_from(["<", ">", "&", "/", "!", "-", "[", "]", '"', "\\", "\u2028", "\u2029", "\ud800", "\udfff"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.recursive(
        st.text(MARKUP | st.characters()), lambda inner: st.lists(inner) | st.dictionaries(st.text(MARKUP), inner)
    )
)
def test_embedded_json_is_inert_and_reads_back_as_written(value: Any) -> None:
    text = embed(value).decode("utf-8")  # UTF-8 throughout: a lone surrogate is escaped
    # What any JSON reader gets from the plain dump (a high and a low surrogate side by side read as one pair).
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"} and json.loads(text) == json.loads(json.dumps(value))
