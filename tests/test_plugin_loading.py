"""The three ways rewards/ reaches ms-swift's ``orms``, each in a fresh interpreter (forked from one that imported
ms-swift alone): an explicit ``register()`` after importing the installed package, and ms-swift's own
``import_external_file`` on the folder and on the file. A plain import registers nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.rewards._found import reward_modules

ROOT = Path(__file__).resolve().parents[1]
KEYS = set(reward_modules())  # every reward file of rewards/ (and installed packages')

# Targets: "imported" (plain import), "installed" (import, then register()), or a path for --external_plugins.
# One interpreter imports ms-swift once (about 13 s of CPU), then forks a child per case: each child starts where a
# fresh interpreter stands after `from swift.utils import import_external_file`, loads its targets in order and
# reports on a pipe.
PROBES = """
import json, os, sys, traceback
from swift.utils import import_external_file

def probe(targets):
    loaded = []
    for target in targets:
        if target in ("imported", "installed"):
            import rewardkit.rewards as mod
            if target == "installed":
                mod.register()
        else:
            mod = import_external_file(target)
        loaded.append(mod.__name__)
    from swift.rewards import orms
    import rewardkit.rewards as rk
    return {
        "modules": loaded,
        "registered": sorted(k for k in rk.REWARDS if k in orms),
        "identical": all(orms.get(k) is cls for k, cls in rk.REWARDS.items()),
        "builtin_kept": "format" in orms,
    }

results = {}
for name, targets in json.loads(sys.argv[1]).items():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            out = {"result": probe(targets)}
        except BaseException:
            out = {"error": traceback.format_exc()}
        with os.fdopen(write, "w") as f:
            f.write(json.dumps(out))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    results[name] = json.loads(text) if text else {"error": f"the child ended with status {status}, no report"}
print(json.dumps(results))
"""
INIT = str(ROOT / "rewards" / "__init__.py")
FOLDER = str(ROOT / "rewards") + "/"


def _cases(version: str) -> dict[str, list[str]]:
    cases = {
        "imported": ["imported"],
        "installed": ["installed"],
        "init": [INIT],
        "init_after": ["imported", INIT],
        "every_way": ["imported", "installed", INIT],
    }
    if _folder_form_supported(version):
        cases |= {"folder": [FOLDER], "folder_after": ["imported", FOLDER]}
        cases["every_way"].insert(1, FOLDER)
    return cases


@pytest.fixture(scope="module")
def loaded() -> dict[str, dict]:
    import swift

    cases = _cases(swift.__version__)
    out = subprocess.run(
        [sys.executable, "-c", PROBES, json.dumps(cases)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def probe(loaded: dict[str, dict], case: str) -> dict:
    report = loaded[case]
    assert "error" not in report, report["error"][-3000:]
    return report["result"]


@pytest.mark.compat
class TestPluginLoading:
    def test_plain_import_registers_nothing(self, loaded) -> None:
        # Importing the package has no side effects: registration needs register() or a plugin entry file.
        result = probe(loaded, "imported")
        assert result["modules"] == ["rewardkit.rewards"]
        assert result["registered"] == [] and result["builtin_kept"]

    def test_installed_package_with_register(self, loaded) -> None:
        result = probe(loaded, "installed")
        assert result["modules"] == ["rewardkit.rewards"]
        assert set(result["registered"]) == KEYS and result["identical"] and result["builtin_kept"]

    def test_folder_form(self, loaded) -> None:
        # --external_plugins rewards/ : ms-swift <= 4.4 imports the folder as package `rewards`.
        import swift

        if not _folder_form_supported(swift.__version__):
            pytest.skip(f"ms-swift {swift.__version__} loads plugin files only")
        result = probe(loaded, "folder")
        assert result["modules"] == ["rewards"]
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_folder_form_after_a_plain_import(self, loaded) -> None:
        # The installed package is already in sys.modules: the folder must still register, under its own name.
        import swift

        if not _folder_form_supported(swift.__version__):
            pytest.skip(f"ms-swift {swift.__version__} loads plugin files only")
        result = probe(loaded, "folder_after")
        assert result["modules"] == ["rewardkit.rewards", "rewards"]
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_init_file_form(self, loaded) -> None:
        # --external_plugins rewards/__init__.py : the file under whatever name ms-swift picks.
        result = probe(loaded, "init")
        assert result["modules"][0] != "rewardkit.rewards"
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_init_file_form_after_a_plain_import(self, loaded) -> None:
        # As a training script that imported rewardkit.rewards before ms-swift loaded the plugin file.
        result = probe(loaded, "init_after")
        assert result["modules"][0] == "rewardkit.rewards" and result["modules"][1] != "rewardkit.rewards"
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_loading_every_way_in_one_process_is_harmless(self, loaded) -> None:
        result = probe(loaded, "every_way")
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_no_top_level_rewards_module_is_installed(self, tmp_path: Path) -> None:
        names = ("rewards", "plugins", "recipes", "data_builders")
        code = f"import importlib.util as u; print([m for m in {names!r} if u.find_spec(m)])"
        out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "[]"


def _folder_form_supported(version: str) -> bool:
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) <= (4, 4)
