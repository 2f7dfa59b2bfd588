"""Every user error in the CLI is one stderr line, ``rewardkit <command>: <message>``, with exit code 2.

The table runs ``rewardkit.cli.main`` in-process (an exception that is not a user error would fail the
test by escaping); a few cases also run as a real subprocess, where a traceback would be visible.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rewardkit import UserError
from rewardkit.cli import main, user_error
from rewardkit.recipes import EXAMPLES

ROOT = Path(__file__).resolve().parents[1]
GOOD = (EXAMPLES / "completions.jsonl").read_bytes()
DEEP = b"[" * 50_000 + b"]" * 50_000
TEST_SPLIT = (EXAMPLES / "annotated_test.jsonl").read_bytes()


def assert_one_line(err: str, command: str, *fragments: str) -> str:
    """``command`` "" is the top-level parser's own error: ``rewardkit: ...``."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].strip(), f"want one stderr line, got:\n{err}"
    assert lines[0].startswith(f"rewardkit {command}: " if command else "rewardkit: "), lines[0]
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def case(
    name: str,
    argv: list[str],
    command: str,
    fragments: list[str],
    files: dict[str, bytes | None] | None = None,
    **env: str,
) -> Any:
    """One row of the table; ``files`` are made in the cwd first (None: a directory)."""
    return pytest.param(argv, command, fragments, files or {}, env, id=name)


G = {"g.jsonl": GOOD}
FILE = {"f": b""}  # a regular file: a path under it can be neither created nor written, even by root
# fmt: off
CASES = [
    case("score-empty", ["score", "--data", "e.jsonl"], "score", ["e.jsonl", "empty"], {"e.jsonl": b""}),
    case("score-blank-lines", ["score", "--data", "e.jsonl"], "score", ["no rows"], {"e.jsonl": b"\n \n\t\n"}),
    case("score-non-utf8", ["score", "--data", "b.jsonl"], "score", ["b.jsonl:2:", "UTF-8"],
         {"b.jsonl": GOOD.splitlines(keepends=True)[0] + b'{"completion": "\xff"}\n'}),
    case("score-json-array", ["score", "--data", "a.jsonl"], "score", ["a.jsonl:1:", "object per line, got a list"],
         {"a.jsonl": b"[1, 2]\n"}),
    case("score-json-string", ["score", "--data", "a.jsonl"], "score", ["a.jsonl:1:"], {"a.jsonl": b'"x"\n'}),
    case("score-bad-json", ["score", "--data", "j.jsonl"], "score", ["j.jsonl:1:", "not valid JSON"],
         {"j.jsonl": b'{"completion": \n'}),
    case("score-deep-json", ["score", "--data", "d.jsonl"], "score", ["d.jsonl:1:", "too deep"],
         {"d.jsonl": DEEP + b"\n"}),
    case("score-huge-int", ["score", "--data", "h.jsonl"], "score", ["h.jsonl:1:"],
         {"h.jsonl": b'{"completion": ' + b"9" * 5000 + b"}\n"}),
    case("score-no-completion", ["score", "--data", "c.jsonl"], "score", ["c.jsonl:1:", "'completion'"],
         {"c.jsonl": b'{"solution": "{}"}\n'}),
    case("score-missing-column", ["score", "--data", "m.jsonl"], "score", ["m.jsonl", "'solution'"],
         {"m.jsonl": b'{"completion": "x"}\n'}),
    case("score-directory", ["score", "--data", "d.jsonl"], "score", ["d.jsonl", "directory"], {"d.jsonl": None}),
    case("demo-missing", ["demo", "--data", "nope.jsonl"], "demo", ["nope.jsonl not found"]),
    case("config-bad-yaml", ["score", "--data", "g.jsonl"], "score", ["c.yaml"],
         {**G, "c.yaml": b"think_length: [\n"}, REWARDKIT_CONFIG="c.yaml"),
    case("config-not-utf8", ["score", "--data", "g.jsonl"], "score", ["c.yaml"],
         {**G, "c.yaml": b"think_length: {unit: \xff}\n"}, REWARDKIT_CONFIG="c.yaml"),
    case("config-nan", ["score", "--data", "g.jsonl"], "score", ["c.yaml", "alpha"],
         {**G, "c.yaml": b"rewrite_similarity: {alpha: .nan}\n"}, REWARDKIT_CONFIG="c.yaml"),
    case("config-missing", ["score", "--data", "g.jsonl"], "score", ["nope.yaml"], G, REWARDKIT_CONFIG="nope.yaml"),
    case("workdir-is-a-file", ["recipe", "run", "planning", "--workdir", "f"], "recipe run",
         ["--workdir", "is a file"], FILE),
    case("workdir-read-only", ["recipe", "run", "planning", "--workdir", "f/sub"], "recipe run",
         ["f/sub", "not a writable directory"], FILE),
    case("recipe-unknown-force", ["recipe", "run", "planning", "--workdir", "w", "--force", "x"], "recipe run",
         ["--force", "'x'"]),
    case("recipe-data-empty", ["recipe", "run", "planning", "--workdir", "w", "--data", "d"], "recipe run",
         ["--data", "teacher_*.jsonl"], {"d": None}),
    case("recipe-full-needs-model", ["recipe", "run", "planning", "--preset", "full"], "recipe run",
         ["--model is required"]),
    case("recipe-eval-user-real-model", ["recipe", "run", "agent", "--workdir", "w", "--eval-user", "real-model"],
         "recipe run", ["--eval-user 'real-model'", "rewardkit real-model"]),  # before any stage, not after training
    case("tiny-model-out-read-only", ["tiny-model", "f/model"], "tiny-model", ["f/model"], FILE),
    case("tiny-model-out-is-a-file", ["tiny-model", "f"], "tiny-model", ["f", "not a directory"], FILE),
    case("tiny-model-empty-corpus", ["tiny-model", "m", "--data", "d"], "tiny-model", ["no *.jsonl files"],
         {"d": None}),
    case("tiny-model-blank-corpus", ["tiny-model", "m", "--data", "d"], "tiny-model", ["no text"],
         {"d": None, "d/a.jsonl": b'{"x": 1}\n'}),
    case("env-replay-deep-actions", ["env", "replay", "--actions", "a.json", "--export", "o.json"], "env replay",
         ["a.json"], {"a.json": DEEP}),
    case("env-replay-export-read-only", ["env", "replay", "--task", "0", "--export", "f/o.json"], "env replay",
         ["f"], FILE),
    case("build-out-read-only", ["build", "planning-grpo", "-i", "in.jsonl", "-o", "f/out.jsonl"],
         "build planning-grpo", ["f"], {**FILE, "in.jsonl": TEST_SPLIT}),
    case("argparse-unknown-option", ["score", "--nope"], "", ["--nope"]),
    case("argparse-bad-choice", ["recipe", "run", "nosuch"], "recipe run", ["'nosuch'"]),
    case("argparse-no-command", [], "", ["required"]),
]
# fmt: on


@pytest.mark.parametrize(("argv", "command", "fragments", "files", "env"), CASES)
def test_user_error_is_one_line_exit_2(
    argv: list[str],
    command: str,
    fragments: list[str],
    files: dict[str, bytes | None],
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for name, data in files.items():
        if data is None:
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_bytes(data)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors exit from inside parse_args
        code = exc.code
    out = capsys.readouterr()
    assert code == 2, out
    assert_one_line(out.err, command, *fragments)
    assert not (tmp_path / "m").exists()  # a failed tiny-model leaves no half-made output


def test_score_with_a_bom_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + GOOD)
    assert main(["score", "--data", "bom.jsonl"]) == 0
    out = capsys.readouterr()
    assert "hallucinated expert" in out.out and not out.err


def test_row_names_are_data_not_markup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    rows = [json.loads(line) for line in GOOD.decode("utf-8").splitlines()[:2]]
    rows[0]["name"], rows[1]["name"] = "[/bold] [red]x", "lone \ud800 surrogate"
    (tmp_path / "n.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["score", "--data", "n.jsonl"]) == 0
    assert "[/bold] [red]x" in capsys.readouterr().out


def test_demo_works_from_an_empty_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 0
    assert "hallucinated expert" in capsys.readouterr().out


def test_recipe_list_advertises_only_runnable_pipelines(capsys) -> None:
    from rewardkit.cli import build_parser

    assert main(["recipe", "list"]) == 0
    advertised = [
        line.split("(rewardkit recipe run ")[1].rstrip(")")
        for line in capsys.readouterr().out.splitlines()
        if "(rewardkit recipe run " in line
    ]
    assert advertised == ["planning", "agent"]
    for name in advertised:  # the parser accepts each one (it would exit 2 on an invalid choice)
        assert build_parser().parse_args(["recipe", "run", name]).pipeline == name


def test_a_bug_is_not_disguised_as_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import rewardkit.runs.stats.scoring

    def boom(*_: object, **__: object) -> None:
        raise TypeError("a genuine bug")

    monkeypatch.setattr(rewardkit.runs.stats.scoring, "score_rows", boom)
    with pytest.raises(TypeError, match="genuine bug"):
        main(["demo"])


class OwnInputError(UserError, ValueError):
    """A user error a plugin author defines outside rewardkit."""


# (what a command raises, whether it is the user's input at fault): the type decides, not the module or the name
BY_TYPE = [
    (OwnInputError("rows.jsonl:3: no 'solution' column"), True),
    (ValueError("rows.jsonl:3: no 'solution' column"), False),  # a bare ValueError is a bug until a type says not
    (KeyError("solution"), False),
]


@pytest.mark.parametrize(("exc", "users"), BY_TYPE)
def test_a_user_error_is_known_by_its_type(exc: Exception, users: bool) -> None:
    import argparse

    message = user_error(exc, argparse.Namespace())
    assert (message == "rows.jsonl:3: no 'solution' column") if users else message is None


def test_debug_reraises_the_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardkit.files.jsonl import JsonlError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_text("[1]\n")
    with pytest.raises(JsonlError, match=r"a\.jsonl:1:"):
        main(["--debug", "score", "--data", "a.jsonl"])


# -- the real entry point: what a user sees in a terminal --------------------------------------------------------
def rewardkit(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rewardkit.cli", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize(
    ("files", "args", "command"),
    [
        ({"a.jsonl": b"[1, 2]\n"}, ["score", "--data", "a.jsonl"], "score"),
        ({"a.json": DEEP}, ["env", "replay", "--actions", "a.json", "--export", "o.json"], "env replay"),
        ({"f": b""}, ["recipe", "run", "planning", "--workdir", "f"], "recipe run"),
    ],
    ids=["score-json-array", "env-replay-deep", "workdir-file"],
)
def test_subprocess_one_line_and_debug_traceback(
    files: dict[str, bytes], args: list[str], command: str, tmp_path: Path
) -> None:
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    plain = rewardkit(tmp_path, *args)
    assert plain.returncode == 2, plain.stderr
    assert_one_line(plain.stderr, command)
    debug = rewardkit(tmp_path, "--debug", *args)
    assert debug.returncode not in (0, 2) and "Traceback" in debug.stderr
