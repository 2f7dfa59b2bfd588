"""TRL's GRPOTrainer on a served domain through ``environment_factory`` (``rewardkit.serve.trl_env``): the tiny Qwen3
trains against `rewardkit env serve --openenv`, the loss on the policy's tokens only, the reward TRL logs the
server's (through the environment's ``get_reward``, or the ``task_completion`` reward function). Runs in the TRL
job's stack (constraints/openenv.txt)."""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv")  # the optional extra, rewardkit[openenv]: the TRL 1.x stack (constraints/openenv.txt)

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
TRAINED = ("0", "1")  # the tasks trained on


def trl_tools(env: Any) -> list[Any]:
    """The tools TRL (1.16) lists for an environment: its class's public functions but reset and get_reward."""
    names = [n for n, _ in inspect.getmembers(type(env), inspect.isfunction) if not n.startswith("_")]
    return [getattr(env, n) for n in names if n not in ("reset", "get_reward")]


@pytest.fixture(scope="module")
def taught(retail: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3 under TRL's Qwen3 chat template (TRL parses tool calls with it), taught in seconds to ask the
    customer through ``send_message`` on the served openings of the tasks trained on, with the tools in its prompt
    as TRL renders them: a random model would never call a tool."""
    from openenv.core.generic_client import GenericEnvClient
    from transformers import AutoTokenizer
    from transformers.utils import get_json_schema
    from trl.chat_template_utils import qwen3_chat_template

    from rewardkit.pipelines.tiny_model import build_tiny_model, teach
    from rewardkit.serve.trl_env import environment_factory

    tools = [get_json_schema(m) for m in trl_tools(environment_factory(retail, "retail")())]
    with GenericEnvClient(base_url=retail).sync() as client:  # the openings TRL appends to the prompt
        openings = [client.reset(task_id=tid).observation["messages"][-1]["content"] for tid in TRAINED]
    tasks = list(get_domain("retail").tasks().values())
    corpus = [CALL, json.dumps(tools), *openings, *(json.dumps(t) for t in tasks[:30])]
    model = build_tiny_model(tmp_path_factory.mktemp("taught"), corpus, max_positions=8192)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = qwen3_chat_template
    tokenizer.save_pretrained(model)
    examples = []
    for opening in openings:
        prompt = [{"role": "user", "content": opening}]
        head = tokenizer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=True)
        whole = tokenizer.apply_chat_template([*prompt, {"role": "assistant", "content": CALL}], tools=tools)
        ids = [int(t) for t in whole["input_ids"]]
        examples.append((ids, [-100] * len(head["input_ids"]) + ids[len(head["input_ids"]) :]))
    return teach(model, examples, steps=300)


@contextlib.contextmanager
def _running(url: str) -> Iterator[tuple[str, None]]:
    """The module's server, as :func:`served` yields one (no process to stop)."""
    yield url, None


def same(logged: float | None, heard: float | None) -> bool:
    """A reward TRL logged (NaN, or None in its log, for none) is the one the server sent (None for none)."""
    if heard is None:
        return logged is None or math.isnan(logged)
    return logged is not None and math.isclose(logged, heard)


@pytest.mark.parametrize(
    ("owns_reward", "lost"),
    [
        # TRL 1.8 and later call the environment's get_reward: no reward function, the reward logged under the
        # environment's class name.
        pytest.param(None, False, id="get_reward: the environment owns the reward"),
        # The reward-function path (TRL 0.29's), kept where asked: task_completion sends the last message.
        pytest.param(False, False, id="task_completion: a reward function scores it"),
        # The server goes away mid-episode: every rollout is unscored (None), and TRL leaves it out (NaN reward, no
        # advantage) rather than scoring it 0 or stopping the training.
        pytest.param(None, True, id="get_reward: a lost session is left out"),
    ],
)
def test_trl_grpo_trains_on_the_served_domain_with_the_servers_reward_and_the_loss_on_the_policys_tokens_only(
    retail: str, taught: Path, tmp_path: Path, owns_reward: bool | None, lost: bool
) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rewardkit.serve.trl_env import environment_factory, task_completion

    with served(tmp_path) if lost else _running(retail) as (url, proc):
        factory = environment_factory(url, "retail", owns_reward=owns_reward)

        class Heard(factory):  # type: ignore[misc, valid-type]
            """The environment, noting the reward the server sent on the wire (None: none came)."""

            def reset(self, **row: Any) -> str:
                self._heard: float | None = None
                return super().reset(**row)

            def send_message(self, message: str) -> str:
                if lost:  # the server goes away while the customer is spoken to
                    proc.terminate()
                    proc.wait(timeout=10)
                return super().send_message(message)

            def _settle(self, result: Any) -> None:
                if result.done:
                    self._heard = result.reward
                super()._settle(result)

        column = Heard.__name__ if hasattr(Heard, "get_reward") else "task_completion"
        tokenizer = AutoTokenizer.from_pretrained(taught)
        seen: list[list[tuple[int, bool]]] = []  # per completion: (token id, whether the loss reads it)
        batches: list[tuple[list[float | None], list[float], list[float]]] = []  # heard, TRL's rewards, advantages

        class Recording(GRPOTrainer):
            def _generate_and_score_completions(self, inputs: Any) -> Any:
                out = super()._generate_and_score_completions(inputs)
                heard = [env._heard for env in self.environments]
                batches.append((heard, list(self._logs["rewards"][column]), list(self._logs["advantages"])))
                return out

            def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
                ids, real, policy = inputs["completion_ids"], inputs["completion_mask"], inputs["tool_mask"]
                for row, pad, own in zip(ids.tolist(), real.tolist(), policy.tolist(), strict=True):
                    seen.append([(t, bool(k)) for t, p, k in zip(row, pad, own, strict=True) if p])
                return super()._compute_loss(model, inputs)

        steps = 1 if lost else 2
        rows = [{"prompt": [{"role": "user", "content": ""}], "task_id": tid} for tid in TRAINED[:steps]]
        config = GRPOConfig(
            output_dir=str(tmp_path / "grpo"),
            max_steps=steps,
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
            model=str(taught),
            processing_class=tokenizer,
            reward_funcs=[] if column == Heard.__name__ else [task_completion],
            args=config,
            train_dataset=Dataset.from_list(rows),
            environment_factory=Heard,
        )
        trainer.train()
    assert trainer.reward_func_names == [column]  # the environment's reward, or task_completion: never both
    logged = [row for row in trainer.state.log_history if "reward" in row]
    assert trainer.state.global_step == steps and len(logged) == steps == len(batches)
    assert all(row["tools/call_frequency"] > 0 for row in logged)  # the policy talked to the customer
    # Every rollout's reward, as TRL logged it, is the one the server sent, and each step's mean theirs.
    for (heard, rewards, advantages), row in zip(batches, logged, strict=True):
        assert len(heard) == len(rewards) == 2 and all(map(same, rewards, heard)), (rewards, heard)
        scored = [r for r in heard if r is not None]
        mean = sum(scored) / len(scored) if scored else None
        assert same(row[f"rewards/{column}/mean"], mean) and same(row["reward"], mean), (row, heard)
        if lost:  # left out: no reward came, and the rollouts move nothing
            assert heard == [None, None] and advantages == [0.0, 0.0] and row["loss"] == 0
        else:
            assert None not in heard  # a closing the server read as a malformed call is scored all the same
    if lost:
        return
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
        # TRL's own discovery (GRPOTrainer.__init__): 1.16 lists the class's public functions but reset and
        # get_reward; 0.29 the instance's public methods but reset (an environment without get_reward there).
        assert {m.__name__ for m in trl_tools(env)} == {*TAKEN, "send_message"} and callable(env.get_reward)
        old = environment_factory(url, folder, owns_reward=False)()
        listed = {name for name, _ in inspect.getmembers(old, inspect.ismethod) if name != "reset"}
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


@pytest.mark.parametrize("name", ["reset", "send_message", "get_reward", "_finish", "__init__", "_hidden", "_url"])
def test_a_tool_trl_could_not_list_fails_the_factory_naming_it(tmp_path: Path, name: str) -> None:
    # reset and get_reward are TRL's (TRL 1.8 on never lists get_reward, and takes it for the reward), send_message
    # the environment's; a name starting with _ TRL skips (and the environment's own helpers have such names): each
    # would be a tool the policy never sees, or one that breaks the session.
    from rewardkit.envs.registry import DomainError
    from rewardkit.serve.trl_env import environment_factory

    folder = notes_domain(tmp_path / f"notes_{name.strip('_')}", "add_note", "get_note", name)  # a domain per name
    with pytest.raises(DomainError, match=f"tool {name!r} cannot be a tool of TRL's environment"):
        environment_factory("http://127.0.0.1:1", str(folder))


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A served notes domain (its URL and folder): task n2 asks for note N001, which says "buy milk"."""
    tmp = tmp_path_factory.mktemp("notes")
    folder = str(notes_domain(tmp / "jotter", "add_note", "get_note"))  # a name of its own
    with served(tmp, folder) as (url, _):
        yield url, folder


MALFORMED = '<tool_call>\n{"name": "get_note"}}\n</tool_call>'  # the server reads it as a call, and refuses it


@pytest.mark.parametrize(
    ("owns_reward", "told", "closing", "reward"),
    [
        pytest.param(None, True, None, 1.0, id="get_reward: the customer told through send_message"),
        # TRL hands get_reward no completion: the last message ends the conversation unheard.
        pytest.param(None, False, None, 0.0, id="get_reward: nothing told"),
        pytest.param(False, False, "Your note N001 says: buy milk.", 1.0, id="task_completion: the closing words"),
        pytest.param(False, False, "Goodbye.", 0.0, id="task_completion: closing words that tell nothing"),
        # The episode the malformed call kept open is ended by a stop alone: scored, never left out.
        pytest.param(False, False, MALFORMED, 0.0, id="task_completion: a closing read as a malformed call"),
    ],
)
def test_the_servers_reward_reaches_trl_through_get_reward_or_task_completion(
    notes: tuple[str, str], owns_reward: bool | None, told: bool, closing: str | None, reward: float
) -> None:
    from rewardkit.serve.trl_env import environment_factory, task_completion

    url, folder = notes
    env = environment_factory(url, folder, owns_reward=owns_reward)()
    assert env.reset(task_id="n2") and "buy milk" in env.get_note(entry_id="N001")
    if told:
        env.send_message("Your note N001 says: buy milk.")
    got = env.get_reward() if owns_reward is None else task_completion([closing], [env])[0]
    assert got == reward and env._record is not None and env._record["termination"] in ("agent_stop", "user_stop")
    assert (env.get_reward() if owns_reward is None else task_completion(["again"], [env])[0]) == reward  # ended
    env._drop()


def test_a_bad_configuration_fails_naming_the_fix(notes: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardkit.serve import trl_env
    from rewardkit.serve.trl_env import environment_factory, task_completion, trl_calls_get_reward

    url, folder = notes
    assert trl_calls_get_reward()  # read from the installed TRL's code (1.16)
    owning = environment_factory(url, folder)()
    assert type(owning).get_reward is not None and not hasattr(
        environment_factory(url, folder, owns_reward=False), "get_reward"
    )
    # Both reward paths at once would count the reward twice: refused before any episode is closed.
    with pytest.raises(ValueError, match=r"ServedJotter own their reward: .*drop task_completion from reward_funcs"):
        task_completion(["Goodbye."], [owning])
    with pytest.raises(TypeError, match="owns_reward is True, False or None"):
        environment_factory(url, folder, owns_reward="yes")  # type: ignore[arg-type]
    # A TRL that never calls get_reward (0.29) would show it to the policy as a tool.
    monkeypatch.setattr(trl_env, "trl_calls_get_reward", lambda: False)
    with pytest.raises(ValueError, match=r"never calls an environment's get_reward .*upgrade TRL to 1\.8 or later"):
        environment_factory(url, folder, owns_reward=True)
    assert not hasattr(environment_factory(url, folder), "get_reward")  # unset: task_completion's path


@pytest.mark.parametrize(
    ("parameter", "why"),
    [("self", "the method's own"), ("from", "a Python keyword"), ("order-id", "not an identifier")],
)
def test_a_tool_parameter_that_cannot_be_a_method_parameter_is_refused_naming_it(parameter: str, why: str) -> None:
    from rewardkit.envs.registry import DomainError
    from rewardkit.serve.trl_env import _tool_method

    spec = {"function": {"name": "lookup", "parameters": {"type": "object", "properties": {parameter: {}}}}}
    with pytest.raises(DomainError, match=rf"tool 'lookup': its parameter '{parameter}' cannot be"):  # {why}
        _tool_method(spec)


def test_a_message_the_server_refuses_is_answered_to_the_policy_and_the_session_goes_on(retail: str) -> None:
    from rewardkit.serve.trl_env import ENDED, environment_factory

    env = environment_factory(retail, "retail")()
    env.reset(task_id="0")
    # Over the server's 1 MiB a message is refused unread; the session stays open, so the rollout is still scored.
    answer = env.find_user_id_by_email(email="x" * 2_000_000)
    assert answer.startswith("error: Server error:") and "1 MiB" in answer, answer[:200]
    assert env.find_user_id_by_email(email="nobody@example.com") != ENDED and not env._done
