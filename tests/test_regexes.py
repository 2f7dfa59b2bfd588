"""Every regular expression in the package against the reward kit's backtracking probe.

Model output reaches these patterns (a policy's reply, a customer's message, a client's step), and a pattern that
backtracks holds the interpreter lock in C: one message then freezes a server or a trainer, and no signal stops it.
The sites are read from the source (``ast``), so a new pattern is probed the day it is written; a site whose
pattern is built at run time from its caller's data is listed below with the reason it cannot backtrack.
"""

from __future__ import annotations

import ast
import importlib
import re

import pytest
from package_files import ROOT, SOURCES, module_name

from rewardkit.testing.hostile import backtracks, regex_bombs

# re.<function> -> the position of its flags argument
FLAGS_AT = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3, "sub": 4}
FLAGS_AT["subn"] = FLAGS_AT["sub"]
# (file, enclosing function) -> why a pattern built there from its caller's data cannot backtrack
BUILT_AT_RUN_TIME = {
    ("rewards/think_quality.py", "ThinkQuality.__init__"): "an alternation of re.escape'd schema keys in quotes",
    ("rewards/_schema_check.py", "_declares"): "the user's own JSON Schema patternProperties, as jsonschema runs",
}
# (file, line) -> why a pattern that backtracks is in the package: never run on model output
REFERENCE_ONLY = {
    ("rewards/strict_format.py", 10): "the definition the linear matches_strict_format is tested and benchmarked on",
}


def _calls(node: ast.AST, scope: str = ""):
    """``(enclosing function, call)`` for each ``re.<function>(...)`` call under ``node``."""
    for child in ast.iter_child_nodes(node):
        func = getattr(child, "func", None)
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "re"
            and (func.attr in FLAGS_AT)
        ):
            yield scope, child
        named = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        yield from _calls(child, f"{scope}.{child.name}".lstrip(".") if named else scope)


def _sites() -> list[tuple[str, str, ast.Call]]:
    """``(file, enclosing function, call)`` for every ``re.<function>(...)`` call in the package's source."""
    return [
        (str(path.relative_to(ROOT)), scope, call)
        for path in SOURCES.values()
        for scope, call in _calls(ast.parse(path.read_text(encoding="utf-8")))
    ]


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _compiled(path: str, call: ast.Call) -> re.Pattern[str] | None:
    """The site's pattern, compiled with its flags: a literal as written, anything else evaluated in its module's
    namespace (module constants, f-strings of them); ``None`` where it needs its caller's data."""
    func = call.func
    assert isinstance(func, ast.Attribute)
    source, flags = _argument(call, 0, "pattern"), _argument(call, FLAGS_AT[func.attr], "flags")
    namespace: dict[str, object] = {"re": re}
    if not isinstance(source, ast.Constant):
        namespace = vars(importlib.import_module(module_name(ROOT / path)))
    try:
        pattern = eval(compile(ast.Expression(source), path, "eval"), namespace)  # our own source
        flag_value = eval(compile(ast.Expression(flags), path, "eval"), namespace) if flags else 0
    except NameError:
        return None
    return re.compile(pattern, flag_value)


SITES = _sites()


def test_the_sweep_finds_the_package_patterns():
    # Each folder holds patterns, and every run-time site listed still exists (no stale reason).
    files = {path.split("/")[0] for path, _, _ in SITES}
    assert {"src", "rewards"} <= files, files
    assert len(SITES) >= 40, len(SITES)
    found = {(path, scope) for path, scope, _ in SITES}
    assert set(BUILT_AT_RUN_TIME) <= found, set(BUILT_AT_RUN_TIME) - found
    lines = {(path, call.lineno) for path, _, call in SITES}
    assert set(REFERENCE_ONLY) <= lines, set(REFERENCE_ONLY) - lines


@pytest.mark.parametrize(("path", "scope", "call"), SITES, ids=[f"{p}:{c.lineno}" for p, _, c in SITES])
def test_no_pattern_backtracks(path, scope, call):
    pattern = _compiled(path, call)
    if pattern is None:
        assert (path, scope) in BUILT_AT_RUN_TIME, (
            f"{path}:{call.lineno} builds its pattern from run-time data: probe it, or list it in BUILT_AT_RUN_TIME "
            "with the reason it cannot backtrack"
        )
        return
    if (path, call.lineno) in REFERENCE_ONLY:
        pytest.skip(REFERENCE_ONLY[path, call.lineno])
    found = backtracks(pattern)
    assert found is None, f"{path}:{call.lineno} {pattern.pattern!r} backtracks on {found[0]}: {found[1].status}"


# The probe itself: patterns known to backtrack are caught, each by the bomb that shows it; linear ones pass.
@pytest.mark.parametrize(
    ("pattern", "bomb"),
    [
        # an unclosed opening: findall retries from each of n openings and scans to the end, n^2 / 2
        (r"<tool_call>(.*?)</tool_call>", "repeated_literal:'<tool_call>'"),
        # nested quantifiers: 2^n ways to split a run of letters that then fails to match
        (r"(a+)+$", "regex_bomb_letters"),
        # a run of spaces then a non-space: each start position rescans the rest of the run
        (r"\s+$", "regex_bomb_spaces"),
        # one block of think and answer between repeated separators
        (r"<think>(.*?)</think>\s*<answer>(.*?)</answer>$", "regex_bomb_tags"),
        # a trim anchored at the start: its leading \s* eats a run that starts the text, so the run must follow
        # another character; then (.*?) stops at each space and \s* rescans the rest of the run, n^2 / 2
        (r"^\s*(.*?)\s*$", "prefixed_run:' '"),
    ],
)
def test_the_probe_catches_backtracking(pattern, bomb):
    compiled = re.compile(pattern, re.DOTALL)
    assert bomb in regex_bombs(compiled)
    found = backtracks(compiled)
    assert found is not None and found[1].status == "timeout", found


@pytest.mark.parametrize(
    "pattern",
    [
        r"<tool_call>([^<]*)</tool_call>",  # no rescan: the body cannot hold the opening's first character
        r"\s+",  # a run is consumed once
        r"^\d{1,6}$",  # bounded
    ],
)
def test_the_probe_passes_linear_patterns(pattern):
    assert backtracks(re.compile(pattern)) is None
