"""``rewardkit env new``: the starter domain, written where the user says, named as the user says."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardkit.cli import main
from rewardkit.envs.registry import STARTER, STARTER_FILES


def test_env_new_writes_the_starter_under_its_new_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "shelf"
    assert main(["env", "new", "shelf", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / f) for f in STARTER_FILES]
    code = (out / "__init__.py").read_text(encoding="utf-8")
    assert 'name="shelf"' in code and 'name="library"' not in code
    # Everything but the name is the starter's, byte for byte.
    assert code.replace('name="shelf"', 'name="library"') == (STARTER / "__init__.py").read_text(encoding="utf-8")
    assert (out / "tasks.json").read_bytes() == (STARTER / "tasks.json").read_bytes()
    # It loads as a domain by its path and passes every check (tests/test_env_check.py checks each one).
    assert main(["env", "check", str(out)]) == 0


def _holding(path: Path) -> Path:
    """``path``, written with the user's own bytes (its folder made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("mine", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "make_out", "message"),
    [
        ("Shelf", lambda p: p / "new", "use lower-case letters"),  # not a name every process can key on
        ("shelf-2", lambda p: p / "new", "use lower-case letters"),
        ("retail", lambda p: p / "new", "is taken by a built-in"),  # a built-in's name: which one loads would vary
        ("shelf", lambda p: _holding(p / "full" / "x.txt").parent, "is not an empty folder"),
        ("shelf", lambda p: _holding(p / "file.txt"), "is not an empty folder"),
    ],
    ids=["capitals", "hyphen", "built-in-name", "folder-with-files", "a-file"],
)
def test_env_new_refuses_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, make_out, message: str
) -> None:
    out = make_out(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["env", "new", name, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
