"""The simulated_user scheduler's hooks, driven as ms-swift drives them (fresh event loop per hook call)."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from _tiny_agent import OPEN_TASK, short_rows
from sim_server import SimServer, free_port

from rewardkit.envs.task_verdict import task_goal
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.endpoint import EndpointSettings
from rewardkit.loop.user_sim.openai_sim import OpenAISimulator
from rewardkit.rewards import TaskCompletion

pytestmark = pytest.mark.compat


def requests(n: int, row: dict[str, Any] | None = None) -> list[Any]:
    from swift.infer_engine.protocol import RolloutInferRequest

    row = row or short_rows([OPEN_TASK])[0]
    return [RolloutInferRequest(messages=copy.deepcopy(row["messages"]), data_dict=row, uuid=f"r{i}") for i in range(n)]


def choice(text: str, finish_reason: str = "stop") -> Any:
    from swift.infer_engine.protocol import ChatCompletionResponseChoice, ChatMessage

    message = ChatMessage(role="assistant", content=text)
    return ChatCompletionResponseChoice(index=0, message=message, finish_reason=finish_reason, token_ids=[1, 2, 3])


def scheduler(simulator: Any, **limits: Any) -> Any:
    """The scheduler under test. The stub simulator's reply, "My email is a@b.c", is a fact no task gives it, which
    the user review flags: these tests count the flags (``user_review: count``) unless they test the review."""
    from rewardkit.plugins.scheduler import SimulatedUserScheduler

    limits = {"user_review": "count", **limits}
    return SimulatedUserScheduler(max_turns=4, simulator=simulator, limits=RolloutLimits(**limits))


def hook(coro: Any) -> Any:
    from swift.rollout.agent_loop import invoke_async_hook  # a new event loop per call, as in colocate mode

    return invoke_async_hook(coro)


def sim(base_url: str, **settings: Any) -> OpenAISimulator:
    settings = EndpointSettings(**{"timeout_s": 2.0, "retries": 1, "backoff_s": 0.05, **settings})
    return OpenAISimulator(base_url, "tiny", guidelines="Play the customer.", settings=settings)


class TestSimulatorFaults:
    def test_a_down_endpoint_trips_the_breaker_naming_it(self) -> None:
        from rewardkit.plugins.scheduler import SimulatorUnavailable

        url = f"http://127.0.0.1:{free_port()}/v1"
        with pytest.raises(SimulatorUnavailable, match=url.replace(".", r"\.")):
            hook(scheduler(sim(url)).on_trajectory_start(requests(4)))

    @pytest.mark.parametrize("server", [{"hang_s": 5.0}, {"fail_first": 100, "status": 503}], ids=["slow", "5xx"])
    def test_failed_episodes_end_as_user_sim_error_and_score_none(self, server: dict[str, Any]) -> None:
        with SimServer(**server) as endpoint:
            sched = scheduler(sim(endpoint.base_url, timeout_s=0.5), max_failed_share=1.0)
            batch = requests(2)
            hook(sched.on_trajectory_start(batch))
            results = [hook(sched.on_turn_end(req, choice("Hello, how can I help?"), 1)) for req in batch]
        assert all(r["done"] for r in results)
        infos = [r["rollout_infos"] for r in results]
        assert {i["termination"] for i in infos} == {"user_sim_error"}
        assert all(endpoint.base_url in i["error"] for i in infos)
        row = batch[0].data_dict
        scores = TaskCompletion()(
            ["", ""],
            messages=[b.messages for b in batch],
            task=[row["task"]] * 2,
            domain=["retail"] * 2,
            rollout_infos=infos,
        )
        assert scores == [None, None]  # left out of training, never a 0


# (the model reviewer's answer, the episode's ending, the flags' kinds): the scripted user, clean to the rules
REVIEWED = [
    ('{"verdict": "accept", "reason": "fine"}', "max_turns", []),
    (
        '{"verdict": "reject", "reason": "it made up a reason", "fault": "user"}',
        "user_sim_mistake",
        ["model_review"],
    ),
    ("no JSON at all", "user_sim_error", []),  # a reviewer that cannot answer: infrastructure, left out
]


class TestUserReview:
    def test_training_leaves_out_an_episode_whose_user_invents_a_fact(self) -> None:
        from rewardkit.plugins.scheduler import SimulatedUserScheduler

        with SimServer() as endpoint:  # it answers "My email is a@b.c": an e-mail the task never gave the user
            sched = SimulatedUserScheduler(max_turns=2, simulator=sim(endpoint.base_url), limits=RolloutLimits())
            [req] = requests(1)
            hook(sched.on_trajectory_start([req]))
            req.messages.append({"role": "assistant", "content": "Your e-mail, please?"})
            assert hook(sched.on_turn_end(req, choice("Your e-mail, please?"), 1)) == {"done": False}
            sched.step(req, choice("Your e-mail, please?"), 1)
            final = hook(sched.on_turn_end(req, choice("Thanks."), 2))  # max_turns = 2
        infos = final["rollout_infos"]
        assert infos["termination"] == "user_sim_mistake"  # the default in training: exclude
        # it never says what it wants either: its only line is the e-mail
        assert {f["kind"] for f in infos["user_flags"]} == {"unseen_fact", "no_request"}
        assert ("unseen_fact", "a@b.c") in {(f["kind"], f["evidence"]) for f in infos["user_flags"]}
        row = req.data_dict
        reward = TaskCompletion()([""], messages=[req.messages], task=[row["task"]], domain=["retail"])
        assert reward != [None]  # offline the same messages score; live, the record leaves the episode out:
        live = TaskCompletion()(
            [""], messages=[req.messages], task=[row["task"]], domain=["retail"], rollout_infos=[infos]
        )
        assert live == [None]

    def test_count_keeps_the_ending_and_records_the_flag(self) -> None:
        with SimServer() as endpoint:
            sched = scheduler(sim(endpoint.base_url))  # user_review: count
            [req] = requests(1)
            hook(sched.on_trajectory_start([req]))
            final = hook(sched.on_turn_end(req, choice("Anything else?"), 4))
        infos = final["rollout_infos"]
        kinds = [f["kind"] for f in infos["user_flags"]]
        assert infos["termination"] == "max_turns" and kinds == ["unseen_fact", "no_request"]

    @pytest.mark.parametrize(("answer", "ending", "kinds"), REVIEWED)
    def test_a_configured_model_reviewer_reads_what_the_rules_passed(
        self, answer: str, ending: str, kinds: list[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from rewardkit.loop.user_sim.scripted import ScriptedSimulator
        from rewardkit.plugins.scheduler import SimulatedUserScheduler

        with SimServer(reply=answer) as reviewer:
            config = tmp_path / "config.yaml"
            config.write_text(f"user_sim:\n  review_url: {reviewer.base_url}\n  review_model: m\n  retries: 0\n")
            monkeypatch.setenv("REWARDKIT_CONFIG", str(config))
            limits = RolloutLimits(max_failed_share=1.0)  # one failed episode of one: counted, not a stopped run
            sched = SimulatedUserScheduler(max_turns=1, simulator=ScriptedSimulator(), limits=limits)
            [req] = requests(1)
            hook(sched.on_trajectory_start([req]))
            final = hook(sched.on_turn_end(req, choice("Let me look into that."), 1))  # max_turns = 1: it ends
        infos = final["rollout_infos"]
        assert (infos["termination"], [f["kind"] for f in infos["user_flags"]]) == (ending, kinds)
        assert reviewer.requests  # asked once per attempt (three for the answer that is not JSON)


class TestRemoteEpisodes:
    def test_env_servers_spread_the_episodes_over_them_in_turn(self, tmp_path: Any, monkeypatch: Any) -> None:
        # Two servers that are down: each episode still goes to the next in turn, and ends as env_error naming it.
        from rewardkit.plugins.scheduler import SimulatedUserScheduler

        urls = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
        config = tmp_path / "config.yaml"
        servers = ", ".join(urls)
        config.write_text(f"rollout:\n  env_servers: [{servers}]\n  max_failed_share: 1.0\n")
        monkeypatch.setenv("REWARDKIT_CONFIG", str(config))
        sched = SimulatedUserScheduler(max_turns=4)
        batch = requests(4)
        hook(sched.on_trajectory_start(batch))
        names = [sched.episodes[req.uuid].simulator.name for req in batch]
        assert set(names) == set(urls) and names[:2] == names[2:]  # in turn: a, b, a, b (from wherever it stood)
        infos = [hook(sched.on_turn_end(req, choice("Hello"), 1))["rollout_infos"] for req in batch]
        assert all(i["termination"] == "env_error" and i["error"].startswith("opening a session on") for i in infos)

    def test_servers_that_are_down_stop_the_run_naming_one(self, tmp_path: Any, monkeypatch: Any) -> None:
        # The failure breaker counts a lost server as it counts a lost simulator: 4 of 4 > 0.5, training stops.
        from rewardkit.plugins.scheduler import SimulatedUserScheduler, SimulatorUnavailable

        url = f"http://127.0.0.1:{free_port()}"
        config = tmp_path / "config.yaml"
        config.write_text(f"rollout:\n  env_servers: [{url}]\n")
        monkeypatch.setenv("REWARDKIT_CONFIG", str(config))
        with pytest.raises(SimulatorUnavailable, match=url.replace(".", r"\.")):
            hook(SimulatedUserScheduler(max_turns=4).on_trajectory_start(requests(4)))


class TestConversation:
    def test_openings_of_a_batch_run_concurrently(self) -> None:
        # Each reply waits (up to 10 s) until 16 requests are in flight: they all are only if none waits on another.
        with SimServer(delay_s=10.0, hold_until=16) as endpoint:
            sched = scheduler(sim(endpoint.base_url, concurrency=16))
            batch = requests(16)
            start = time.monotonic()
            hook(sched.on_trajectory_start(batch))
        assert endpoint.max_in_flight == 16  # all 16 openings were in flight at once, not 6 or 1
        assert time.monotonic() - start < 10  # released by the 16th arrival, not by the bound
        assert all(req.messages[-1]["content"] != short_rows([OPEN_TASK])[0]["messages"][1]["content"] for req in batch)

    def test_tool_then_user_turns_through_the_hooks(self) -> None:
        with SimServer() as endpoint:
            sched = scheduler(sim(endpoint.base_url))
            [req] = requests(1)
            hook(sched.on_trajectory_start([req]))
            call = '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}\n</tool_call>'
            req.messages.append({"role": "assistant", "content": call})
            assert hook(sched.on_turn_end(req, choice(call), 1)) == {"done": False}
            sched.step(req, choice(call), 1)
            assert req.messages[-1]["role"] == "tool" and "#W2378156" in req.messages[-1]["content"]
            req.messages.append({"role": "assistant", "content": "Could you confirm?"})
            assert hook(sched.on_turn_end(req, choice("Could you confirm?"), 2)) == {"done": False}
            sched.step(req, choice("Could you confirm?"), 2)
            assert req.messages[-1]["role"] == "user"
            final = hook(sched.on_turn_end(req, choice("Anything else?"), 4))  # max_turns = 4
        infos = final["rollout_infos"]
        assert final["done"] and infos["termination"] == "max_turns" and infos["tool_calls"] == 1
        assert [a["tool"] for a in infos["audit"]] == ["get_order_details"]
        assert infos["goal"] == task_goal(req.data_dict["domain"], req.data_dict["task"]).to_json()  # for the reward
        assert sched.episodes == {}  # the episode and its database are released

    def test_rows_without_the_task_columns_fail_naming_them(self) -> None:
        from rewardkit.envs.tasks import TaskError

        row = {"messages": [{"role": "user", "content": "hi"}]}
        with pytest.raises(TaskError, match=r"\['task', 'domain'\].*--multi-turn"):
            hook(scheduler(sim("http://127.0.0.1:1/v1")).on_trajectory_start(requests(1, row)))
