"""TRL's GRPOTrainer on a served domain through ``environment_factory`` (``rewardkit.serve.trl_env``): the tiny Qwen3
trains two steps against `rewardkit env serve --openenv`, the loss on the policy's tokens only. Runs in the OpenEnv
job (`make test-openenv`)."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv")  # the optional extra: rewardkit[openenv], in its own stack (constraints/openenv.txt)

from openenv_servers import served
from spec_domains import KEY, write_spec
from spec_domains import task as spec_task

from rewardkit.envs import get_domain

pytestmark = pytest.mark.openenv


@pytest.fixture(scope="module")
def retail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("openenv")) as (url, _):
        yield url


ASK = {"name": "send_message", "arguments": {"message": "Could you give me your e-mail address?"}}
CALL = f"<tool_call>\n{json.dumps(ASK)}\n</tool_call>"


def taught_model(out: Path, tools: list[dict[str, Any]]) -> Path:
    """The tiny Qwen3 under TRL's Qwen3 chat template (TRL parses tool calls with it), taught in seconds to ask the
    customer through ``send_message`` with ``tools`` in its prompt, as TRL renders them: a random model would never
    call a tool."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template

    from rewardkit.pipelines.tiny_model import build_tiny_model, teach

    tasks = list(get_domain("retail").tasks().values())
    corpus = [CALL, json.dumps(tools), *(json.dumps(t) for t in tasks[:30])]
    model = build_tiny_model(out, corpus, max_positions=8192)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = qwen3_chat_template
    tokenizer.save_pretrained(model)
    examples = []
    for task in tasks[:2]:  # the openings of the two tasks trained on
        prompt = [{"role": "user", "content": task["user_scenario"]["instructions"]["reason_for_call"]}]
        head = tokenizer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=True)
        whole = tokenizer.apply_chat_template([*prompt, {"role": "assistant", "content": CALL}], tools=tools)
        ids = [int(t) for t in whole["input_ids"]]
        examples.append((ids, [-100] * len(head["input_ids"]) + ids[len(head["input_ids"]) :]))
    return teach(model, examples, steps=300)


def test_trl_grpo_trains_on_the_served_domain_with_the_loss_on_the_policys_tokens_only(
    retail: str, tmp_path: Path
) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from transformers.utils import get_json_schema
    from trl import GRPOConfig, GRPOTrainer

    from rewardkit.serve.trl_env import environment_factory, task_completion

    factory = environment_factory(retail, "retail")
    methods = inspect.getmembers(factory(), inspect.ismethod)
    tools = [get_json_schema(m) for name, m in methods if name != "reset" and not name.startswith("_")]
    model = taught_model(tmp_path / "model", tools)
    tokenizer = AutoTokenizer.from_pretrained(model)
    seen: list[list[tuple[int, bool]]] = []  # per completion: (token id, whether the loss reads it)

    class Recording(GRPOTrainer):
        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            ids, real, policy = inputs["completion_ids"], inputs["completion_mask"], inputs["tool_mask"]
            for row, pad, own in zip(ids.tolist(), real.tolist(), policy.tolist(), strict=True):
                seen.append([(t, bool(k)) for t, p, k in zip(row, pad, own, strict=True) if p])
            return super()._compute_loss(model, inputs)

    rows = [{"prompt": [{"role": "user", "content": ""}], "task_id": tid} for tid in ("0", "1")]
    config = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        max_steps=2,
        num_generations=2,
        per_device_train_batch_size=2,
        max_completion_length=160,
        max_tool_calling_iterations=2,
        logging_steps=1,
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        seed=42,
    )
    trainer = Recording(
        model=str(model),
        processing_class=tokenizer,
        reward_funcs=[task_completion],
        args=config,
        train_dataset=Dataset.from_list(rows),
        environment_factory=factory,
    )
    trainer.train()
    logged = [row for row in trainer.state.log_history if "reward" in row]
    assert trainer.state.global_step == 2 and len(logged) == 2
    assert all(row["tools/call_frequency"] > 0 for row in logged)  # the policy talked to the customer
    # The customer's replies came back as tool turns, and none of their tokens is trained on: each completion's
    # masked-out span is exactly what the served user said, and the policy's tokens hold its own call.
    masked = [tokenizer.decode([t for t, k in tokens if not k]) for tokens in seen]
    trained = [tokenizer.decode([t for t, k in tokens if k]) for tokens in seen]
    assert any("e-mail" in text or "email" in text or "zip" in text for text in masked), masked
    assert all("send_message" in text for text in trained) and not any("<tool_response>" in t for t in trained)


TASK_0 = get_domain("retail").tasks()["0"]
EDITED_0 = {**TASK_0, "evaluation_criteria": {**TASK_0["evaluation_criteria"], "communicate_info": ["a refund"]}}


@pytest.mark.parametrize(
    ("row", "refused"),
    [
        pytest.param("tau2-grpo", None, id="a build tau2-grpo row: its task column, no task_id"),
        pytest.param({"task_id": "0"}, None, id="task_id"),
        pytest.param({"task_id": 0, "task": json.dumps(TASK_0)}, None, id="both, agreeing"),
        pytest.param({"task": TASK_0}, None, id="the task as an object"),
        # A dataset built from another version of the domain's tasks: the server refuses it, naming the mismatch,
        # rather than training on episodes it scores against its own task.
        pytest.param({"task": json.dumps(EDITED_0)}, "reset: task '0' is not the caller's", id="another version"),
        pytest.param({}, "the row names no task", id="no task"),  # never a task drawn at random
        pytest.param({"task_id": "1", "task": json.dumps(TASK_0)}, "task_id '1' is not the id of", id="two tasks"),
        pytest.param({"task": "{"}, "task column is not JSON", id="not JSON"),
        pytest.param({"task": "[1]"}, "task column is not a task with an id", id="not a task"),
    ],
)
def test_a_row_plays_the_task_it_names_or_is_refused(retail: str, row: Any, refused: str | None) -> None:
    from openenv.core.generic_client import GenericEnvClient

    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
    from rewardkit.serve.trl_env import environment_factory

    if row == "tau2-grpo":
        built = build_tau2_grpo(Tau2Options(domain="retail", split="train"))[0]
        row = next(r for r in built if json.loads(r["task"])["id"] == "0")
        assert "task_id" not in row
    env = environment_factory(retail, "retail")()
    if refused is not None:
        with pytest.raises(Exception, match=refused):
            env.reset(prompt=[{"role": "user", "content": ""}], **row)  # TRL passes every column
        return
    with GenericEnvClient(base_url=retail).sync() as direct:  # task 0's opening (the scripted user: one opening)
        opening = direct.reset(task_id="0").observation["messages"][-1]["content"]
    assert env.reset(prompt=[{"role": "user", "content": ""}], **row) == opening
    env._drop()


NOTES_SCHEMA = "CREATE TABLE notes (entry_id TEXT PRIMARY KEY, note TEXT NOT NULL);"
NOTE = {"type": "object", "properties": {"entry_id": {"type": "string"}, "note": {"type": "string"}}}
ENTRY = {"type": "object", "properties": {"entry_id": {"type": "string"}}, "required": ["entry_id"]}


def notes_domain(folder: Path, write: str, read: str, *more: str) -> Path:
    """A spec domain of notes whose tools take the names given: ``write`` adds a note, ``read`` (and each of
    ``more``) reads one."""
    adds = {"insert": "notes", "values": {"note": "note"}, "id": {"column": "entry_id", "prefix": "N"}}
    tools = [
        {
            "name": write,
            "description": "Add a note.",
            "risk": "write",
            "returns": NOTE,
            "parameters": {"type": "object", "properties": {"note": {"type": "string"}, **KEY}, "required": ["note"]},
            "rule": adds,
        },
        *(
            {
                "name": name,
                "description": "Read a note.",
                "risk": "read",
                "returns": NOTE,
                "parameters": {
                    "type": "object",
                    "properties": {"entry_id": {"type": "string"}},
                    "required": ["entry_id"],
                },
                "rule": {"get": "notes", "key": {"entry_id": "entry_id"}},
            }
            for name in (read, *more)
        ),
    ]
    tasks = [
        spec_task("n1", "You want the note 'call Bo' kept.", [{"name": write, "arguments": {"note": "call Bo"}}]),
        spec_task(
            "n2", "You want to read note N001.", [{"name": read, "arguments": {"entry_id": "N001"}}], ["buy milk"]
        ),
    ]
    return write_spec(folder, NOTES_SCHEMA, tools, tasks, {"notes": [{"entry_id": "N001", "note": "buy milk"}]})


TAKEN = ("record", "done", "reward", "url")  # the names of the environment's state before it was private


def test_every_tool_is_listed_and_the_session_keeps_to_the_servers_rules(tmp_path: Path) -> None:
    from rewardkit.serve.trl_env import environment_factory

    folder = str(notes_domain(tmp_path / "notes", *TAKEN))
    with served(tmp_path, folder, "--max-sessions", "1", "--idle-s", "4") as (url, _):
        env = environment_factory(url, folder)()
        # TRL's own discovery (GRPOTrainer.__init__): every method but reset and those starting with _.
        listed = {name for name, _ in inspect.getmembers(env, inspect.ismethod) if name != "reset"}
        assert {name for name in listed if not name.startswith("_")} == {*TAKEN, "send_message"}
        assert env.reset(task_id="n2")  # the server's URL is the environment's: a tool named url does not replace it
        assert "buy milk" in env.done(entry_id="N001")  # the tool named done runs on the server
        # The one session the server holds is taken: another is refused at connect, the server's reason in the error.
        with pytest.raises(ConnectionError, match=r"HTTP 503 .*--max-sessions 1"):
            environment_factory(url, folder)().reset(task_id="n1")
        # Idle past --idle-s (TRL trains between two resets), the session is closed and its slot freed: the next
        # reset opens a new session in it.
        time.sleep(5)
        assert env.reset(task_id="n2") and "buy milk" in env.done(entry_id="N001")
        env._drop()


@pytest.mark.parametrize("name", ["reset", "send_message", "_finish", "__init__", "_hidden", "_url"])
def test_a_tool_trl_could_not_list_fails_the_factory_naming_it(tmp_path: Path, name: str) -> None:
    # reset is TRL's, send_message the environment's; a name starting with _ TRL skips (and the environment's
    # own helpers have such names): each would be a tool the policy never sees, or one that breaks the session.
    from rewardkit.envs.registry import DomainError
    from rewardkit.serve.trl_env import environment_factory

    folder = notes_domain(tmp_path / f"notes_{name.strip('_')}", "add_note", "get_note", name)  # a domain per name
    with pytest.raises(DomainError, match=f"tool {name!r} cannot be a tool of TRL's environment"):
        environment_factory("http://127.0.0.1:1", str(folder))
