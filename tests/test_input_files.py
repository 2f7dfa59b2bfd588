"""Files a command reads by default are inputs too: the domain's bundled data is never an output.

The bundled files are the repository's own (an editable install): each test that names one as an output
keeps its bytes and puts them back if the refusal ever fails, so a regression cannot damage the checkout.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewardkit.cli import main
from rewardkit.envs import get_domain
from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.retail import domain as retail_domain
from rewardkit.envs.retail.db import TABLES
from rewardkit.loop.user_sim.cache import CachedSimulator, ReplyCacheError
from rewardkit.loop.user_sim.scripted import ScriptedSimulator

BUNDLED = ["db.json", "tasks.json", "split_tasks.json", "policy.md", "simulation_guidelines.md"]


@contextlib.contextmanager
def kept(path: Path) -> Iterator[None]:
    before = path.read_bytes()
    try:
        yield
    finally:
        if path.read_bytes() != before:  # the refusal failed: repair the checkout, then fail below
            path.write_bytes(before)
            pytest.fail(f"{path} was overwritten")


def test_the_domain_declares_every_file_it_reads() -> None:
    # Everything in data/ but the notes (SOURCE.md, LICENSE) is read by some command.
    declared = [path for _, path in get_domain("retail").input_files()]
    assert sorted(p.name for p in declared) == sorted(BUNDLED)
    assert {p.name for p in DATA_DIR.iterdir()} - set(BUNDLED) == {"SOURCE.md", "LICENSE"}
    assert all(label == "retail domain data" for label, _ in get_domain("retail").input_files())


@pytest.mark.parametrize("name", BUNDLED)
@pytest.mark.parametrize(
    "argv",
    [
        ["env", "replay", "--task", "0", "--export", "{out}"],
        ["build", "tau2-grpo", "--split", "train", "--out", "{out}"],
        ["build", "tau2-grpo", "--split", "train", "--out", "{tmp}/o.jsonl", "--rejects", "{out}"],
        ["build", "tau2-grpo", "--split", "train", "--out", "{tmp}/o.jsonl", "--report", "{out}"],
    ],
    ids=["replay-export", "build-out", "build-rejects", "build-report"],
)
@pytest.mark.parametrize("via", ["path", "symlink"])
def test_a_bundled_file_is_never_an_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], name: str, via: str
) -> None:
    target = DATA_DIR / name
    out = target
    if via == "symlink":  # the same file under another name is the same input
        out = tmp_path / "link.json"
        out.symlink_to(target)
    with kept(target):
        code = main([a.format(out=out, tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"is also an input (retail domain data {target})" in err and "choose another output path" in err
    assert not (tmp_path / "o.jsonl").exists()  # nothing else was written either


@pytest.fixture
def corrupt_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the data directory, read by the retail domain instead of the bundled one."""
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR, data)
    monkeypatch.setattr(retail_domain, "DATA_DIR", data)
    monkeypatch.setattr(TABLES, "seed", data / "db.json")
    retail_domain._read_json.cache_clear()
    retail_domain.policy.cache_clear()
    TABLES._template.cache_clear()
    yield data
    retail_domain._read_json.cache_clear()
    retail_domain.policy.cache_clear()
    TABLES._template.cache_clear()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        # a torn or overwritten database: the message names the file, not just "not valid JSON"
        ("db.json", '{"users": ', "db.json: not a usable db.json: Expecting value"),
        ("db.json", "[]", "db.json: not a tau2 retail db.json: missing or malformed field"),
        ("tasks.json", "{", "tasks.json: not valid JSON (Expecting property name"),
        ("tasks.json", '{"users": {}}', "tasks.json: not a tau2 tasks file"),
        ("split_tasks.json", "[1]", "split_tasks.json: not a tau2 split file"),
    ],
)
def test_a_corrupt_bundled_file_is_named(
    corrupt_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, message: str
) -> None:
    (corrupt_data / name).write_text(content, encoding="utf-8")
    argv = ["env", "replay", "--task", "0", "--export", str(tmp_path / "state.json")]
    if name == "split_tasks.json":
        argv = ["build", "tau2-grpo", "--split", "train", "--out", str(tmp_path / "o.jsonl")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{corrupt_data / name}" in err and message in err, err


NOT_SQLITE = "not a SQLite reply cache (file is not a database); remove it or choose another path"


@pytest.mark.parametrize("mode", ["read_write", "replay"])
def test_a_user_cache_that_is_not_sqlite_is_one_error(tmp_path: Path, mode: str) -> None:
    junk = tmp_path / "x"
    junk.write_text("these are not the pages of a SQLite database\n" * 20, encoding="utf-8")
    with pytest.raises(ReplyCacheError) as info:
        CachedSimulator(ScriptedSimulator(), junk, mode)  # type: ignore[arg-type]
    assert str(info.value) == f"--user-cache {junk}: {NOT_SQLITE}"
    assert junk.read_text(encoding="utf-8").startswith("these are not")  # left as it was


def test_the_cli_says_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "x"
    junk.write_bytes(b"\x00\x01 not sqlite" * 100)
    argv = [
        "synth",
        "agent",
        "--agent",
        "gold",
        "--user",
        "scripted",
        "--user-cache",
        str(junk),
        "--tasks",
        "50",
        "--no-progress",
        "--out",
        str(tmp_path / "sft.jsonl"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"rewardkit synth agent: --user-cache {junk}: {NOT_SQLITE}\n"
