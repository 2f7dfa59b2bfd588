"""Hypothesis over the CLI's inputs: any input file and any $REWARDKIT_CONFIG ends in exit 0, or in exit 2
with one stderr line; never a traceback or another exception.

``rewardkit.cli.main`` runs in-process (a subprocess per example would spend seconds importing ms-swift);
an exception that is not a user error escapes ``main`` and fails the example.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit.cli import main
from rewardkit.recipes import EXAMPLES

GOOD_ROWS = [json.loads(line) for line in (EXAMPLES / "completions.jsonl").read_text(encoding="utf-8").splitlines()]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
# Rows shaped like the real ones, with any cell replaced by any JSON value or dropped.
row_keys = st.sampled_from(["completion", "solution", "experts", "name", "think_min", "think_max", "messages"])
rows = st.builds(
    lambda base, drop, replace: {k: v for k, v in {**base, **replace}.items() if k not in drop},
    st.sampled_from(GOOD_ROWS),
    st.sets(row_keys, max_size=2),
    st.dictionaries(row_keys, json_values, max_size=2),
)


def _lines(values: list[Any], bom: bool, junk: bytes) -> bytes:
    body = b"".join(json.dumps(v).encode("utf-8") + b"\n" for v in values)
    return (b"\xef\xbb\xbf" if bom else b"") + body + junk


input_files = st.one_of(
    st.binary(max_size=400),
    st.builds(_lines, st.lists(json_values, max_size=4), st.booleans(), st.binary(max_size=8)),
    st.builds(_lines, st.lists(rows, min_size=1, max_size=4), st.booleans(), st.just(b"")),
)

config_keys = {
    "think_length": ["unit", "min", "max", "eps", "mode"],
    "think_quality": ["banned", "repetition_ngram", "min_distinct_ratio"],
    "rewrite_similarity": ["alpha", "cjk_units"],
    "expert_match": ["fuzzy_threshold"],
    "plan_coverage": ["match_threshold", "duplicate_threshold", "cross_expert", "weights"],
    "schema_keys": ["rewrite", "plan", "expert", "tasks"],
}
scalars = st.none() | st.booleans() | st.integers(-5, 500) | st.floats() | st.text(max_size=10)
sections = st.sampled_from(sorted(config_keys)).flatmap(
    lambda section: st.tuples(
        st.just(section),
        st.dictionaries(st.sampled_from(config_keys[section]), scalars | st.lists(scalars, max_size=3), max_size=3)
        | scalars,
    )
)
config_texts = st.one_of(
    st.text(max_size=200),
    st.lists(sections, max_size=3).map(lambda items: yaml.safe_dump(dict(items), allow_unicode=True)),
)


def run_cli(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue()


def assert_clean_end(code: int, err: str) -> None:
    assert "Traceback" not in err
    assert code in (0, 2), (code, err)
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("rewardkit score: "), err


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a config naming a model must never reach for the network


@SETTINGS
@given(data=input_files)
def test_any_input_file_scores_or_is_one_line(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.jsonl"
        path.write_bytes(data)
        assert_clean_end(*run_cli(["score", "--data", str(path)]))


@SETTINGS
@given(text=config_texts)
def test_any_config_yaml_scores_or_is_one_line(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(text, encoding="utf-8", errors="surrogatepass")
        monkeypatch.setenv("REWARDKIT_CONFIG", str(config))
        assert_clean_end(*run_cli(["score"]))


@SETTINGS
@given(data=st.binary(max_size=200))
def test_any_config_bytes_scores_or_is_one_line(data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_bytes(data)
        monkeypatch.setenv("REWARDKIT_CONFIG", str(config))
        assert_clean_end(*run_cli(["score"]))
