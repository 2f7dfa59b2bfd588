"""The three ways rewards/ reaches ms-swift's ``orms``, each in a fresh interpreter: an explicit
``register()`` after importing the installed package, and ms-swift's own ``import_external_file``
on the folder and on the file. A plain import registers nothing."""

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
PROBE = """
import json, sys
from swift.utils import import_external_file
loaded = []
for target in sys.argv[1:]:
    if target in ("imported", "installed"):
        import rewardkit.rewards as mod
        if target == "installed":
            mod.register()
    else:
        mod = import_external_file(target)
    loaded.append(mod.__name__)
from swift.rewards import orms
import rewardkit.rewards as rk
print(json.dumps({
    "modules": loaded,
    "registered": sorted(k for k in rk.REWARDS if k in orms),
    "identical": all(orms.get(k) is cls for k, cls in rk.REWARDS.items()),
    "builtin_kept": "format" in orms,
}))
"""


def probe(*targets: str, cwd: Path = ROOT) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *targets], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.compat
class TestPluginLoading:
    def test_plain_import_registers_nothing(self) -> None:
        # Importing the package has no side effects: registration needs register() or a plugin entry file.
        result = probe("imported")
        assert result["modules"] == ["rewardkit.rewards"]
        assert result["registered"] == [] and result["builtin_kept"]

    def test_installed_package_with_register(self) -> None:
        result = probe("installed")
        assert result["modules"] == ["rewardkit.rewards"]
        assert set(result["registered"]) == KEYS and result["identical"] and result["builtin_kept"]

    def test_folder_form(self) -> None:
        # --external_plugins rewards/ : ms-swift <= 4.4 imports the folder as package `rewards`.
        import swift

        if not _folder_form_supported(swift.__version__):
            pytest.skip(f"ms-swift {swift.__version__} loads plugin files only")
        result = probe(str(ROOT / "rewards") + "/")
        assert result["modules"] == ["rewards"]
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_folder_form_after_a_plain_import(self) -> None:
        # The installed package is already in sys.modules: the folder must still register, under its own name.
        import swift

        if not _folder_form_supported(swift.__version__):
            pytest.skip(f"ms-swift {swift.__version__} loads plugin files only")
        result = probe("imported", str(ROOT / "rewards") + "/")
        assert result["modules"] == ["rewardkit.rewards", "rewards"]
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_init_file_form(self) -> None:
        # --external_plugins rewards/__init__.py : the file under whatever name ms-swift picks.
        result = probe(str(ROOT / "rewards" / "__init__.py"))
        assert result["modules"][0] != "rewardkit.rewards"
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_init_file_form_after_a_plain_import(self) -> None:
        # As a training script that imported rewardkit.rewards before ms-swift loaded the plugin file.
        result = probe("imported", str(ROOT / "rewards" / "__init__.py"))
        assert result["modules"][0] == "rewardkit.rewards" and result["modules"][1] != "rewardkit.rewards"
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_loading_every_way_in_one_process_is_harmless(self) -> None:
        import swift

        targets = ["imported", "installed", str(ROOT / "rewards" / "__init__.py")]
        if _folder_form_supported(swift.__version__):
            targets.insert(1, str(ROOT / "rewards") + "/")
        result = probe(*targets)
        assert set(result["registered"]) == KEYS and result["identical"]

    def test_no_top_level_rewards_module_is_installed(self, tmp_path: Path) -> None:
        names = ("rewards", "plugins", "recipes", "data_builders")
        code = f"import importlib.util as u; print([m for m in {names!r} if u.find_spec(m)])"
        out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "[]"


def _folder_form_supported(version: str) -> bool:
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) <= (4, 4)
