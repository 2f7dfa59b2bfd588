"""Every builder on records of arbitrary JSON shape: it never raises (only BuildError under --on-error
stop), ``read == written + sum(rejected)``, and every row it writes is strict, encodable JSON."""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conftest import E5
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit.data_builders._io import BuildError, BuildReport
from rewardkit.data_builders.planning._common import InputSpec
from rewardkit.data_builders.planning.grpo import GrpoOptions, build_grpo
from rewardkit.data_builders.planning.sft import SftOptions, build_sft
from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
from rewardkit.envs.retail import DATA_DIR

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STEPS = [
    {"专家": "数据分析专家", "处理问题": ["分析营收"]},
    {"专家": "策略推荐专家", "处理问题": ["推荐"], "depends_on": [0]},
]
HISTORY = [{"role": "user", "content": "上个月营收"}, {"role": "assistant", "content": "12.3万元"}]
BASE = {
    "id": "p1",
    "query": "分析营收并推荐",
    "history": HISTORY,
    "experts": E5,
    "tools": ["经营周报"],
    "products": ["收钱码"],
}
THINK = "用户想分析营收并获得策略推荐，先交给数据分析专家，再由策略推荐专家基于结果给出建议。"
ANSWER = json.dumps({"补全后的问题": "分析营收并推荐", "plan": STEPS}, ensure_ascii=False)
ANNOTATED = {**BASE, "rewrite": "分析营收并推荐", "plan": STEPS}
TEACHER = {
    **BASE,
    "output": f"<think>\n{THINK}\n</think>\n\n<answer>\n{ANSWER}\n</answer>",
    "gold": {"补全后的问题": "分析营收并推荐", "plan": STEPS},
}
TASK0 = json.loads((DATA_DIR / "tasks.json").read_text(encoding="utf-8"))[0]

# Any JSON value, lone surrogates included; NaN and ±inf where the writer may emit them.
SCALARS = st.none() | st.booleans() | st.integers() | st.text(st.characters(exclude_categories=()), max_size=12)


def json_values(*, nan: bool) -> st.SearchStrategy[Any]:
    leaves = SCALARS | st.floats(allow_nan=nan, allow_infinity=nan)
    return st.recursive(
        leaves,
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
        max_leaves=12,
    )


Path_ = tuple[str | int, ...]


def paths(value: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every place in ``value`` a replacement can go (the value itself excluded)."""
    out: list[Path_] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        out.append((*prefix, key))
        out += paths(child, (*prefix, key))
    return out


def mutated(valid: dict[str, Any], *, nan: bool) -> st.SearchStrategy[Any]:
    """A valid record with some fields, at any depth, replaced by arbitrary JSON or deleted."""
    where = paths(valid)
    edit = st.tuples(st.sampled_from(where), st.none() | json_values(nan=nan), st.booleans())

    def apply(edits: Sequence[tuple[Path_, Any, bool]]) -> dict[str, Any]:
        record = copy.deepcopy(valid)
        for path, value, delete in edits:
            try:  # an earlier edit may have replaced a parent of this path: then the edit is skipped
                node: Any = record
                for key in path[:-1]:
                    node = node[key]
                if delete and isinstance(node, dict):
                    del node[path[-1]]
                else:
                    node[path[-1]] = value
            except (KeyError, IndexError, TypeError):
                continue
        return record

    return st.lists(edit, min_size=1, max_size=3).map(apply)


def lines(valid: dict[str, Any]) -> st.SearchStrategy[list[bytes]]:
    """JSONL lines: valid records, mutated ones, arbitrary JSON values and arbitrary bytes."""
    values = st.one_of(st.just(valid), mutated(valid, nan=True), json_values(nan=True))
    # ensure_ascii writes a lone surrogate as a \ud800 escape; without it, as bytes that are not UTF-8.
    as_json = st.tuples(values, st.booleans()).map(
        lambda v: json.dumps(v[0], ensure_ascii=v[1]).encode("utf-8", errors="surrogatepass")
    )
    junk = st.binary(max_size=20).map(lambda b: b.replace(b"\n", b""))
    return st.lists(st.one_of(as_json, as_json, junk), max_size=8)


def assert_rows_are_strict_json(rows: Sequence[dict[str, Any]]) -> None:
    for row in rows:
        text = json.dumps(row, ensure_ascii=False, allow_nan=False)  # no NaN/Infinity
        text.encode("utf-8")  # no lone surrogates
        assert all(isinstance(m.get("content"), str) and m["content"] for m in row["messages"])


def check_planning(data: list[bytes], build: Callable[[list[InputSpec], str], tuple[list, BuildReport]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.jsonl"
        path.write_bytes(b"\n".join(data) + b"\n")
        rows, report = build([InputSpec(path, None)], "skip")
        report.check()
        nonblank = [x for x in data if x.decode("utf-8", errors="replace").removeprefix("\ufeff").strip()]
        assert report.read == len(nonblank) and report.written == len(rows)
        assert_rows_are_strict_json(rows)
        with contextlib.suppress(BuildError):  # the one exception allowed: a bad record under stop
            build([InputSpec(path, None)], "stop")


@SETTINGS
@given(lines(ANNOTATED))
def test_planning_grpo_never_raises_and_counts_reconcile(data: list[bytes]) -> None:
    check_planning(data, lambda specs, on_error: build_grpo(specs, GrpoOptions(on_error=on_error)))


@SETTINGS
@given(lines(TEACHER))
def test_planning_sft_never_raises_and_counts_reconcile(data: list[bytes]) -> None:
    check_planning(data, lambda specs, on_error: build_sft(specs, SftOptions(on_error=on_error, think_min=10)))


def _task_id(item: Any) -> str | None:
    ok = isinstance(item, dict) and isinstance(item.get("id"), str | int) and not isinstance(item.get("id"), bool)
    return str(item["id"]) if ok else None


@SETTINGS
@given(st.lists(st.one_of(st.just(TASK0), mutated(TASK0, nan=False), json_values(nan=False)), max_size=6))
def test_tau2_never_raises_and_counts_reconcile(tasks: list[Any]) -> None:
    ids = [i for i in map(_task_id, tasks) if i is not None]
    with tempfile.TemporaryDirectory() as tmp:
        (tasks_file := Path(tmp) / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
        (split_file := Path(tmp) / "split.json").write_text(json.dumps({"s": [*ids, "ghost"]}), encoding="utf-8")
        rows, report = build_tau2_grpo(
            Tau2Options(domain="retail", split="s", tasks_file=tasks_file, split_file=split_file)
        )
    report.check()
    # Each split id is read once; each tasks-file item no split can name (or a repeat) is read and rejected.
    unnamed = len(tasks) - len(set(ids))
    assert report.read == len(ids) + 1 + unnamed and report.written == len(rows)
    assert_rows_are_strict_json(rows)
    for row in rows:
        task = json.loads(row["task"])
        assert isinstance(task["evaluation_criteria"], dict) and row["messages"][1]["content"]
