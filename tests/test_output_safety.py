"""No input is ever overwritten, no output is ever torn: every file the CLI writes goes through files.outputs."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import E5

from rewardkit.cli import build as cli_build
from rewardkit.cli import main
from rewardkit.data_builders.planning import grpo
from rewardkit.files import outputs
from rewardkit.files.outputs import OutputError, OutputSet, atomic_write_text, atomic_writer, check_outputs

STEP = {"专家": "数据分析专家", "处理问题": ["查看经营周报"]}
GOOD = {"id": "a1", "query": "查看经营周报", "experts": E5, "rewrite": "查看经营周报", "plan": [STEP]}
BAD = {"id": "a2", "query": "查看经营周报", "experts": E5, "rewrite": "x", "plan": [{**STEP, "专家": "外星专家"}]}
ACTIONS = [{"name": "calculate", "arguments": {"expression": "1 + 1"}}]


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file under ``root`` with its bytes (a symlink by its target), to prove nothing changed."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        key = str(p.relative_to(root))
        out[key] = f"-> {os.readlink(p)}" if p.is_symlink() else (p.read_bytes() if p.is_file() else "dir")
    return out


def temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace with one input, a prompt, tau2 files, an actions file and a previous good output."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_text(json.dumps(GOOD, ensure_ascii=False) + "\n", encoding="utf-8")
    (tmp_path / "prompt.txt").write_text("专家：$experts\n$extras对话：\n$history", encoding="utf-8")
    (tmp_path / "tasks.json").write_text("[]", encoding="utf-8")
    (tmp_path / "split.json").write_text('{"s": []}', encoding="utf-8")
    (tmp_path / "policy.md").write_text("Be brief.", encoding="utf-8")
    (tmp_path / "x.json").write_text(json.dumps(ACTIONS), encoding="utf-8")
    (tmp_path / "prev.jsonl").write_text('{"previous": "good output"}\n', encoding="utf-8")
    (tmp_path / "link.jsonl").symlink_to("a.jsonl")
    os.link(tmp_path / "a.jsonl", tmp_path / "hard.jsonl")
    (tmp_path / "sub").mkdir()
    (tmp_path / "plainfile").write_text("not a directory", encoding="utf-8")
    return tmp_path


GRPO = ["build", "planning-grpo"]
TAU2 = [
    "build",
    "tau2-grpo",
    "--split",
    "s",
    "--tasks-file",
    "tasks.json",
    "--split-file",
    "split.json",
    "--policy-file",
    "policy.md",
]
REPLAY = ["env", "replay", "--actions", "x.json"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # the case: -o is the input
        ([*GRPO, "-i", "a.jsonl", "-o", "a.jsonl"], "--out a.jsonl is also an input (--input a.jsonl)"),
        # the same file spelled differently
        ([*GRPO, "-i", "a.jsonl", "-o", "./sub/../a.jsonl"], "is also an input (--input a.jsonl)"),
        # a symlink to the input, as output or as input
        ([*GRPO, "-i", "a.jsonl", "-o", "link.jsonl"], "--out link.jsonl is also an input"),
        ([*GRPO, "-i", "link.jsonl", "-o", "a.jsonl"], "--out a.jsonl is also an input (--input link.jsonl)"),
        # a hard link: another path, the same inode
        ([*GRPO, "-i", "a.jsonl", "-o", "hard.jsonl"], "--out hard.jsonl is also an input"),
        # the second of two inputs, with a ratio
        ([*GRPO, "-i", "prev.jsonl:1", "-i", "a.jsonl:1", "-o", "a.jsonl"], "(--input a.jsonl)"),
        # --rejects / --report onto an input
        ([*GRPO, "-i", "a.jsonl", "-o", "o.jsonl", "--rejects", "a.jsonl"], "--rejects a.jsonl is also an input"),
        ([*GRPO, "-i", "a.jsonl", "-o", "o.jsonl", "--report", "a.jsonl"], "--report a.jsonl is also an input"),
        # --rejects / --report onto -o, or onto each other
        (
            [*GRPO, "-i", "a.jsonl", "-o", "o.jsonl", "--rejects", "o.jsonl"],
            "--rejects o.jsonl is the same file as --out",
        ),
        (
            [*GRPO, "-i", "a.jsonl", "-o", "o.jsonl", "--report", "o.jsonl"],
            "--report o.jsonl is the same file as --out",
        ),
        (
            [*GRPO, "-i", "a.jsonl", "-o", "o.jsonl", "--rejects", "r", "--report", "r"],
            "--report r is the same file as",
        ),
        # the prompt template is an input too
        ([*GRPO, "-i", "a.jsonl", "-o", "prompt.txt", "--prompt", "prompt.txt"], "(--prompt prompt.txt)"),
        # sft takes the same checks
        (["build", "planning-sft", "-i", "a.jsonl", "-o", "a.jsonl"], "--out a.jsonl is also an input"),
        # an output that is a directory, or under a regular file
        ([*GRPO, "-i", "a.jsonl", "-o", "sub"], "--out sub is a directory"),
        ([*GRPO, "-i", "a.jsonl", "-o", "plainfile/o.jsonl"], "plainfile is not a directory"),
        # tau2: none of its three input files
        ([*TAU2, "-o", "tasks.json"], "--out tasks.json is also an input (--tasks-file tasks.json)"),
        ([*TAU2, "-o", "o.jsonl", "--report", "split.json"], "--report split.json is also an input (--split-file"),
        ([*TAU2, "-o", "policy.md"], "(--policy-file policy.md)"),
        # env replay: the export is neither the actions file nor the database
        ([*REPLAY, "--export", "x.json"], "--export x.json is also an input (--actions x.json)"),
        (["env", "replay", "--task", "0", "--db", "x.json", "--export", "x.json"], "(--db x.json)"),
    ],
)
def test_refused_outputs_change_nothing(
    ws: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    before = snapshot(ws)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert err.startswith(("rewardkit build ", "rewardkit env replay: "))
    assert snapshot(ws) == before  # input bytes equal, nothing created


def test_as_a_real_process_the_input_survives_without_a_traceback(ws: Path) -> None:
    before = (ws / "a.jsonl").read_bytes()
    cmd = [sys.executable, "-m", "rewardkit.cli", "build", "planning-grpo", "-i", "a.jsonl", "-o", "a.jsonl"]
    done = subprocess.run(cmd, cwd=ws, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == (
        "rewardkit build planning-grpo: --out a.jsonl is also an input (--input a.jsonl); choose another output path\n"
    )
    assert (ws / "a.jsonl").read_bytes() == before


def _unwritable_dir(ws: Path) -> Path:
    """A directory this process cannot write: chmod 0o500, or (as root, where chmod does not bind)
    a path under a regular file, which fails for root too."""
    locked = ws / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if not os.access(locked, os.W_OK):
        return locked
    locked.chmod(0o700)
    return ws / "plainfile"


def unlock(ws: Path) -> None:
    if (ws / "locked").exists():
        (ws / "locked").chmod(0o700)  # so that pytest can clean up tmp_path


@pytest.mark.parametrize("flag", ["--out", "--rejects", "--report"])
def test_unwritable_location_fails_before_anything_is_read(
    ws: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    bad = str(_unwritable_dir(ws) / "x.jsonl")
    outs = {"--out": "prev.jsonl", "--rejects": "r.jsonl", "--report": "r.json", flag: bad}
    before = snapshot(ws)
    # The input does not exist: had anything been read first, the error would be about it.
    argv = [*GRPO, "-i", "missing.jsonl", *[a for kv in outs.items() for a in kv]]
    try:
        assert main(argv) == 2
    finally:
        unlock(ws)
    err = capsys.readouterr().err
    assert err.startswith(f"rewardkit build planning-grpo: {flag} {bad}") and err.count("\n") == 1, err
    assert "missing.jsonl" not in err
    assert snapshot(ws) == before  # the previous --out is byte-identical


@pytest.fixture
def after_build(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[], None]], None]:
    """Run an action right after the build, i.e. after the output checks and before the writes."""

    def install(action: Callable[[], None]) -> None:
        real = grpo.build_grpo

        def build(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            action()
            return result

        monkeypatch.setattr(grpo, "build_grpo", build)

    return install


def test_failure_writing_rejects_leaves_the_previous_out_untouched(
    ws: Path, capsys: pytest.CaptureFixture[str], after_build: Callable[[Callable[[], None]], None]
) -> None:
    (ws / "a.jsonl").write_text(f"{json.dumps(GOOD)}\n{json.dumps(BAD)}\n", encoding="utf-8")
    # Valid when checked; replaced by a regular file before the rejects are written.
    after_build(lambda: ((ws / "sub").rmdir(), (ws / "sub").write_text("now a file")))
    before = snapshot(ws)
    argv = [*GRPO, "-i", "a.jsonl", "-o", "prev.jsonl", "--rejects", "sub/r.jsonl", "--report", "rep.json"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rewardkit build planning-grpo: cannot write --rejects sub/r.jsonl") and err.count("\n") == 1
    after = snapshot(ws)
    assert after.pop("sub") == b"now a file" and before.pop("sub") == "dir"
    assert after == before  # --out untouched, no --report, no temporaries
    assert temporaries(ws) == []


def test_disk_full_half_way_through_out_leaves_it_untouched(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "a.jsonl").write_text("".join(json.dumps({**GOOD, "id": i}) + "\n" for i in range(20)), encoding="utf-8")

    def torn(rows: list[Any], out: Any) -> None:
        out.write(json.dumps(rows[0]) + "\n" + '{"half a ')  # a partial line, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cli_build, "write_jsonl", torn)
    before = snapshot(ws)
    assert main([*GRPO, "-i", "a.jsonl", "-o", "prev.jsonl"]) == 2
    assert "cannot write --out prev.jsonl: No space left on device" in capsys.readouterr().err
    assert snapshot(ws) == before and temporaries(ws) == []


def test_successful_build_writes_every_output_whole(ws: Path) -> None:
    (ws / "a.jsonl").write_text(f"{json.dumps(GOOD)}\n{json.dumps(BAD)}\n", encoding="utf-8")
    (ws / "prev.jsonl").chmod(0o640)
    argv = [*GRPO, "-i", "a.jsonl", "-o", "prev.jsonl", "--rejects", "new/r.jsonl", "--report", "new/rep.json"]
    assert main(argv) == 0
    assert [json.loads(x)["id"] for x in (ws / "prev.jsonl").read_text(encoding="utf-8").splitlines()] == ["a1"]
    assert stat.S_IMODE((ws / "prev.jsonl").stat().st_mode) == 0o640  # the previous file's permissions kept
    assert json.loads((ws / "new/r.jsonl").read_text(encoding="utf-8"))["reason"] == "gold_expert_not_in_list"
    assert json.loads((ws / "new/rep.json").read_text(encoding="utf-8"))["written"] == 1
    assert temporaries(ws) == []


def test_env_replay_export_is_written_atomically(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (ws / "state.json").write_text("previous", encoding="utf-8")
    assert main([*REPLAY, "--export", "state.json"]) == 0
    assert "products" in json.loads((ws / "state.json").read_text(encoding="utf-8"))
    assert temporaries(ws) == []
    # An unwritable export fails before the actions file is read (it does not exist here).
    bad = str(_unwritable_dir(ws) / "s.json")
    try:
        assert main(["env", "replay", "--actions", "missing.json", "--export", bad]) == 2
    finally:
        unlock(ws)
    err = capsys.readouterr().err
    assert err.startswith(f"rewardkit env replay: --export {bad}") and "missing.json" not in err


class TestSafeIo:
    def test_message_names_both_paths_and_the_flag(self, tmp_path: Path) -> None:
        a = tmp_path / "a.jsonl"
        with pytest.raises(OutputError) as info:
            check_outputs([("-i", a)], [("--out", a)])
        assert str(info.value) == f"--out {a} is also an input (-i {a}); choose another output path"
        assert isinstance(info.value, ValueError)

    def test_bare_paths_and_none_are_accepted(self, tmp_path: Path) -> None:
        check_outputs([tmp_path / "in", None], [tmp_path / "out", None, tmp_path / "new" / "deeper" / "out2"])
        with pytest.raises(OutputError, match=r"output .* is the same file as output"):
            check_outputs([], [tmp_path / "o", tmp_path / "o"])

    def test_symlink_output_keeps_the_link_and_writes_its_target(self, tmp_path: Path) -> None:
        (tmp_path / "target").write_text("old", encoding="utf-8")
        (tmp_path / "link").symlink_to("target")
        atomic_write_text(tmp_path / "link", "new")
        assert (tmp_path / "link").is_symlink() and (tmp_path / "target").read_text(encoding="utf-8") == "new"

    def test_an_exception_while_writing_keeps_the_previous_file(self, tmp_path: Path) -> None:
        path = tmp_path / "o.txt"
        path.write_text("previous", encoding="utf-8")
        with pytest.raises(KeyError), atomic_writer(path) as f:
            f.write("partial")
            raise KeyError("boom")
        assert path.read_text(encoding="utf-8") == "previous" and temporaries(tmp_path) == []

    def test_nothing_is_renamed_until_every_output_is_written(self, tmp_path: Path) -> None:
        first, second = tmp_path / "1", tmp_path / "2"
        first.write_text("old 1", encoding="utf-8")
        with pytest.raises(RuntimeError), OutputSet() as outputs:
            outputs.write_text(first, "new 1")
            assert first.read_text(encoding="utf-8") == "old 1"  # staged beside it, not yet in place
            with outputs.open(second) as f:
                f.write("half")
                raise RuntimeError("second output failed")
        assert first.read_text(encoding="utf-8") == "old 1" and not second.exists()
        assert temporaries(tmp_path) == []

    @pytest.mark.parametrize(("durable", "fsyncs"), [(True, 2), (False, 0)])  # the file and its folder, or neither
    def test_a_derived_output_is_renamed_whole_without_waiting_for_the_disk(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durable: bool, fsyncs: int
    ) -> None:
        calls: list[int] = []
        real = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd) or real(fd))
        path = tmp_path / "page.html"
        path.write_bytes(b"old")
        with OutputSet(durable=durable) as outputs:
            outputs.write_bytes(path, b"new page")
            assert path.read_bytes() == b"old"  # staged beside it either way
        assert path.read_bytes() == b"new page" and temporaries(tmp_path) == [] and len(calls) == fsyncs

    def test_a_new_file_gets_the_umask_mode_not_0600(self, tmp_path: Path) -> None:
        old = os.umask(0o022)
        try:
            atomic_write_text(tmp_path / "n.txt", "x")
        finally:
            os.umask(old)
        assert stat.S_IMODE((tmp_path / "n.txt").stat().st_mode) == 0o644

    @pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null")
    def test_a_device_is_written_in_place_never_replaced(self) -> None:
        check_outputs([], [Path("/dev/null")])
        atomic_write_text("/dev/null", "discarded")
        assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)

    def test_write_errors_name_the_flag(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        def full(*args: Any, **kwargs: Any) -> None:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")

        monkeypatch.setattr(outputs.os, "fsync", full)
        with pytest.raises(OutputError, match=r"cannot write --report .*r\.json: Disk quota exceeded"):
            atomic_write_text(tmp_path / "r.json", "{}", "--report")
        assert list(tmp_path.iterdir()) == []
