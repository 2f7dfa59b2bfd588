"""One run of the loop, as ``rewardkit synth agent`` and ``rewardkit eval agent`` (and the agent chain) describe it.

Who plays the agent (``gold``, an OpenAI-compatible URL, or a local checkpoint), who plays the
user (``scripted`` or a URL), which domain and tasks, how many trials, the loop's limits: a
:class:`RunSpec`. :func:`build_plan` turns it into the plan and the run's fingerprint, which a
resumed log must match. The flags that fill a RunSpec live in the CLI (``rewardkit.cli.synth``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rewardkit.config import Config
from rewardkit.config.origin import named, provenance
from rewardkit.envs import Domain, get_domain, portable_ref
from rewardkit.loop.agents import AGENT_SETTINGS, AgentError, make_agent_factory
from rewardkit.loop.config import load_run_config
from rewardkit.loop.endpoint import EndpointSettings
from rewardkit.loop.sampling import Sampling, problem
from rewardkit.loop.user_sim.config import make_simulator
from rewardkit.runs.episodes.episode_log import RunError, fingerprint
from rewardkit.runs.episodes.selection import select_tasks
from rewardkit.runs.episodes.trials import TrialPlan

RULES = ("tau2", "mua-rl")  # task completion: tau2 (state and outputs) or mua-rl (state only)


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """Everything a run of agent <-> simulated user <-> tools is made of. The defaults are the CLI's; a user or loop
    field left None takes the config file's value (``user_sim``, ``rollout``), or the default (:func:`run_config`)."""

    # the agent
    agent: str  # gold, an http(s):// OpenAI-compatible URL, or a model directory
    agent_model: str | None = None  # the model at the agent URL (None: the one model it serves)
    temperature: float = 0.0
    top_k: int | None = None  # sample from the k likeliest tokens only (None: all of them)
    top_p: float = 1.0  # sample from the likeliest tokens holding this much probability
    seed_base: int = 0  # the random stream of the sampled trials (0: every evaluation's, so models pair up)
    max_tokens: int = 1024  # the agent's tokens per message
    agent_retries: int = AGENT_SETTINGS.retries  # extra attempts per agent call (URL agents)
    agent_timeout: float = AGENT_SETTINGS.timeout_s  # seconds per agent call (URL agents)
    # the user
    user: str | None = None  # scripted, or an http(s):// URL of a chat model
    user_model: str | None = None
    user_retries: int | None = None
    user_timeout: float | None = None
    user_max_tokens: int | None = None
    user_cache: Path | None = None  # SQLite reply cache of the simulator
    config: Path | None = None  # the config file (None: $REWARDKIT_CONFIG): its user_sim and rollout sections
    # tasks and loop
    domain: str  # a built-in name, an entry point or a domain's path
    mcp: str | None = None  # take the tools from this MCP server (command line or URL)
    simulated: bool = False  # --tools simulated: a spec domain's calls answered from each task's memory
    tool_model: str | None = None  # the tool LLM's URL (None: each tool's rule, deterministic)
    tool_model_name: str | None = None  # its model (None: the one model it serves)
    memory_model: str | None = None  # the URL of an LLM writing each task's memory (None: the task's, or the seed)
    sim_cache: Path | None = None  # SQLite replies of the tool and memory models: a run replays
    split: str
    tasks: tuple[str, ...] | None = None  # task ids within the split (None or empty: all of them)
    limit: int | None = None  # only the first N tasks
    trials: int = 1  # episodes per task
    system_prompt: Path | None = None  # the agent's system prompt (None: the domain's policy)
    tools: bool = True  # False: send no tool specs, write no tools column (the system prompt has them)
    max_turns: int | None = None  # agent turns per episode
    rule: str = "tau2"  # one of RULES
    workers: int = 8  # episodes in flight
    price: tuple[float, float] | None = None  # USD per million prompt and completion tokens: the ledger's cost
    task_file: Path | None = None  # a JSON list of tasks in place of the domain's (split "all")

    def __post_init__(self) -> None:
        if self.tasks is not None:  # any sequence of ids; none at all means every task, as no --tasks does
            object.__setattr__(self, "tasks", tuple(self.tasks) or None)

    def options(self) -> list[str]:
        """The ``synth agent`` / ``eval agent`` options that give this spec: ``--split`` and ``--trials``
        always (their defaults differ between the two), every other field only where it is not the default."""
        out: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name not in ("split", "trials") and value == f.default:
                continue
            if f.name == "tools":
                out.append("--no-tools")
            elif f.name == "simulated":
                out += ["--tools", "simulated"]
            elif f.name == "tasks":
                out += ["--tasks", ",".join(value)]
            else:
                out += [f"--{f.name.replace('_', '-')}", str(value)]
        return out


def _domain(spec: RunSpec) -> Domain:
    if spec.simulated:
        return _simulated(spec)
    if spec.mcp is None:
        return get_domain(spec.domain)
    try:
        from rewardkit.envs.mcp_domain import mcp_domain
    except ImportError as exc:
        raise RunError(f"--mcp needs the MCP SDK ({exc}); pip install 'rewardkit[mcp]'") from exc
    return mcp_domain(spec.mcp, base=spec.domain)


def _simulated(spec: RunSpec) -> Domain:
    """The spec domain with its calls answered by the tool model (else by rule) and each task's memory written by
    the memory model (else the task's own, or the seed)."""
    from rewardkit.loop.endpoint import only_model
    from rewardkit.loop.replies import ReplyStore
    from rewardkit.loop.roles import JsonRole
    from rewardkit.loop.tool_sim import PROMPT_VERSION, MemoryWriter, ToolModel, simulated_domain

    base = get_domain(spec.domain)
    if base.simulation is None:
        raise RunError(
            f"--tools simulated: domain {base.name!r} has Python tools; simulated tools need a domain "
            "given as a spec (a folder with domain.json: docs/simulated_tools.md)"
        )
    cache = ReplyStore(spec.sim_cache, label="--sim-cache") if spec.sim_cache is not None else None

    def role(name: str, url: str, model: str | None, flag: str) -> JsonRole:
        if not url.startswith(("http://", "https://")):
            raise RunError(f"{flag} {url!r}: must be an http(s):// URL of an OpenAI-compatible endpoint")
        try:
            model = model or only_model(url, f"pass {flag}-name")
        except ValueError as exc:
            raise RunError(f"{flag} {url}: {exc}") from exc
        return JsonRole(name, url, model, cache=cache, version=PROMPT_VERSION, max_tokens=2048)

    tool = ToolModel(role("tool", spec.tool_model, spec.tool_model_name, "--tool-model")) if spec.tool_model else None
    memory = None
    if spec.memory_model is not None:
        memory_role = role(
            "memory",
            spec.memory_model,
            None if spec.memory_model != spec.tool_model else spec.tool_model_name,
            "--memory-model",
        )
        memory = MemoryWriter(memory_role, base)
    return simulated_domain(base, tool, memory)


def _user(cfg: Config, domain: Domain) -> tuple[Any, dict[str, Any]]:
    """The simulator and its description (a scripted user has no endpoint, whatever the file says of one)."""
    user = cfg.user_sim
    sim = make_simulator(user, domain)
    url, model = (user.base_url, user.model) if user.kind == "openai" else (None, None)
    return sim, {"kind": user.kind, "base_url": url, "model": model, "fingerprint": sim.fingerprint()}


# Whole-number options and their least value; number options and whether 0 is allowed (a timeout of 0 fails
# every call, a temperature of 0 is greedy decoding).
_COUNTS = {
    "trials": 1,
    "workers": 1,
    "max_tokens": 1,
    "max_turns": 1,
    "limit": 1,
    "agent_retries": 0,
    "user_retries": 0,
    "user_max_tokens": 1,
    "seed_base": 0,
}
_NUMBERS = {"agent_timeout": "> 0", "user_timeout": "> 0"}


def task_ids(text: str | None) -> tuple[str, ...] | None:
    """``--tasks`` as ids: None when the option is absent (the whole split); an option with no id is an error."""
    if text is None:
        return None
    ids = tuple(t.strip() for t in text.split(",") if t.strip())
    if not ids:
        raise RunError(
            f"--tasks {text!r} names no task id; give comma-separated ids (--tasks 0,2), or leave "
            "--tasks out for the whole split"
        )
    return ids


def _system_prompt(path: Path | None) -> str | None:
    """The prompt file's text (a BOM is not part of it), each failure as one line naming the flag."""
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise RunError(f"--system-prompt {path}: not found; give the prompt's text file") from None
    except IsADirectoryError:
        raise RunError(f"--system-prompt {path} is a directory; give the prompt's text file") from None
    except UnicodeDecodeError as exc:
        raise RunError(f"--system-prompt {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise RunError(f"--system-prompt {path}: {exc.strerror or exc}") from None


def _check(spec: RunSpec) -> None:
    for name, low in _COUNTS.items():
        value = getattr(spec, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise RunError(f"--{name.replace('_', '-')} must be a whole number >= {low}, got {value!r}")
        if value < low:
            raise RunError(f"--{name.replace('_', '-')} must be at least {low}, got {value}")
    for name, bound in _NUMBERS.items():
        value = getattr(spec, name)
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not number or not (value > 0 if bound == "> 0" else value >= 0):
            raise RunError(f"--{name.replace('_', '-')} must be a finite number {bound}, got {value!r}")
    found = problem(spec.temperature, spec.top_k, spec.top_p)
    if found is not None:
        raise RunError(f"--{found[0].replace('_', '-')} {found[1]}")
    if spec.rule not in RULES:
        raise RunError(f"--rule {spec.rule!r}: choose from {', '.join(RULES)}")
    given = [f for f in ("tool_model", "tool_model_name", "memory_model", "sim_cache") if getattr(spec, f) is not None]
    if given and not spec.simulated:
        raise RunError(f"--{given[0].replace('_', '-')} simulates tools: add --tools simulated")
    if spec.simulated and spec.mcp is not None:
        raise RunError("--tools simulated and --mcp both say where the tools are: choose one")


def _check_models(spec: RunSpec, cfg: Config) -> None:
    """A model name the endpoint does not serve stops the run before any episode (where it lists its models)."""
    from rewardkit.loop.endpoint import check_model

    user = cfg.user_sim
    endpoints = [(spec.agent, spec.agent_model, "agent endpoint", "--agent-model", spec.agent_timeout)]
    if user.kind == "openai" and cfg.origin("user_sim.model") != "--user":  # not the one model it serves
        where, fix = named(cfg, "user_sim.base_url"), named(cfg, "user_sim.model")
        endpoints.append((user.base_url, user.model, where, fix, user.call_timeout_s()))
    for url, model, who, flag, timeout in endpoints:
        if model is not None and url is not None and url.startswith(("http://", "https://")):
            try:
                check_model(url, model, f"fix {flag}", timeout_s=min(10.0, timeout))
            except ValueError as exc:
                raise RunError(f"{who} {url}: {exc}") from exc


def _simulator_ledgers(domain: Domain) -> tuple[Any, ...]:
    """The ledgers of a simulated domain's tool and memory models (none for rules)."""
    sim = domain.simulation
    found = (getattr(sim.answer, "ledger", None), getattr(sim.memory, "ledger", None)) if sim is not None else ()
    return tuple(ledger for ledger in found if ledger is not None)


def check_options(spec: RunSpec) -> None:
    """The spec's numbers and its config file with the flags laid over it, checked without contacting any endpoint:
    what ``--user real-model`` checks before it starts a server. ``spec.user`` itself is not read."""
    _check(spec)
    run_config(dataclasses.replace(spec, user=None, user_model=None))


def build_plan(spec: RunSpec) -> tuple[TrialPlan, dict[str, Any]]:
    """The run the spec describes, and its description (``meta["run"]`` is the fingerprint)."""
    _check(spec)
    cfg = run_config(spec)
    _check_models(spec, cfg)
    domain = _domain(spec)
    if spec.task_file is not None:
        from rewardkit.runs.tasks.task_file import with_task_file

        domain, task_file_sha256 = with_task_file(domain, spec.task_file)
    system = _system_prompt(spec.system_prompt)
    tasks, unusable = select_tasks(domain, spec.split, list(spec.tasks) if spec.tasks else None, spec.limit)
    try:
        tools = domain.tool_specs() if spec.tools else []
        settings = EndpointSettings(retries=spec.agent_retries, timeout_s=spec.agent_timeout, concurrency=spec.workers)
        make_agent, agent = make_agent_factory(
            spec.agent,
            tools,
            model=spec.agent_model,
            sampling=Sampling(spec.temperature, spec.top_k, spec.top_p),
            max_tokens=spec.max_tokens,
            **({"settings": settings} if spec.agent.startswith(("http://", "https://")) else {}),
        )
    except AgentError as exc:
        raise RunError(str(exc)) from exc
    except ValueError as exc:
        raise RunError(str(exc)) from exc
    simulator, user = _user(cfg, domain)
    limits = cfg.rollout
    ledgers = tuple(x.ledger for x in (make_agent, simulator) if getattr(x, "ledger", None) is not None)
    ledgers += _simulator_ledgers(domain)
    plan = TrialPlan(
        domain=domain,
        tasks=tasks,
        trials=spec.trials,
        make_agent=make_agent,
        simulator=simulator,
        limits=limits,
        system=system,
        workers=spec.workers,
        require_outputs=spec.rule == "tau2",
        ledgers=ledgers,
        price_per_mtok=spec.price,
        seed_base=spec.seed_base,
    )
    prompt = system if system is not None else domain.policy()
    # The fingerprint's inputs: a log written by an earlier version must still match the same options.
    described = {
        "domain": domain.name,
        "split": spec.split,
        "agent": agent,
        "user": user,
        "rule": spec.rule,
        "system_prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest(),
        "tools": spec.tools,
        "limits": {
            "max_turns": limits.max_turns,
            "token_budget": limits.token_budget,
            "error_budget": limits.error_budget,
        },
    }
    if spec.mcp is not None:  # only then: the fingerprints of runs without MCP stay what they were
        described["mcp"] = spec.mcp
    if spec.seed_base:  # likewise
        described["seed_base"] = spec.seed_base
    if spec.task_file is not None:  # likewise
        described["task_file_sha256"] = task_file_sha256
    if spec.simulated:  # likewise
        described["tools_simulated"] = {
            "domain": domain.name,
            "tool_model": spec.tool_model,
            "memory_model": spec.memory_model,
        }
    meta = {
        "run": fingerprint(described),
        **described,
        "trials": spec.trials,
        "tasks": len(tasks),
        "settings": provenance(cfg, *SECTIONS),
    }
    meta["domain_ref"] = portable_ref(spec.domain)  # how another process finds the domain (view); not fingerprinted
    return plan, {**meta, "unusable_tasks": unusable}  # left out of the split, id -> why


# -- the run's config: the file's user_sim and rollout sections, with the flags laid over them ------------------
# (a flag wins; a flag left out leaves the file's value, or the default). Each flag names one key, but --user, which
# stands for the simulator's endpoint as a whole: scripted sets user_sim.kind; a URL sets kind: openai, base_url and,
# without --user-model, model (the one model the URL serves). cfg.origin(key) names where each value came from.
# RunSpec field -> (its flag, the config key it sets)
FLAGS = {
    "user_model": ("--user-model", "user_sim.model"),
    "user_retries": ("--user-retries", "user_sim.retries"),
    "user_timeout": ("--user-timeout", "user_sim.timeout_s"),
    "user_max_tokens": ("--user-max-tokens", "user_sim.max_tokens"),
    "user_cache": ("--user-cache", "user_sim.cache"),
    "max_turns": ("--max-turns", "rollout.max_turns"),
}
SECTIONS = ("user_sim", "rollout")  # what a run reads of the file (the report lists their sources)


def run_config(spec: RunSpec) -> Config:
    """The whole config file (``spec.config``, else ``$REWARDKIT_CONFIG``) with ``spec``'s given flags laid over it."""
    flags = _user_flags(spec.user, spec.user_model)
    for field, (flag, key) in FLAGS.items():
        value = getattr(spec, field)
        if value is not None:
            flags[key] = (flag, str(value) if field == "user_cache" else value)
    return load_run_config(path=spec.config, flags=flags)  # a message names the file, or the flag


def check_user(user: str, flag: str = "--user") -> None:
    """A run's user simulator is ``scripted`` or the http(s):// URL of a chat model; anything else raises, naming
    ``flag``."""
    if user != "scripted" and not user.startswith(("http://", "https://")):
        raise RunError(
            f"{flag} {user!r}: pass scripted or an http(s):// URL (synth and eval agent also take real-model; "
            f"elsewhere serve it: `rewardkit real-model` prints the command, and pass its URL)"
        )


def _user_flags(user: str | None, model: str | None) -> dict[str, tuple[str, Any]]:
    if user is None:
        return {}
    check_user(user)
    if user == "scripted":
        return {"user_sim.kind": ("--user", "scripted")}
    flags = {"user_sim.kind": ("--user", "openai"), "user_sim.base_url": ("--user", user)}
    if model is None:
        flags["user_sim.model"] = ("--user", _only_model(user))
    return flags


def _only_model(base_url: str) -> str:
    from rewardkit.loop.endpoint import only_model

    try:
        return only_model(base_url, "pass --user-model")
    except ValueError as exc:
        raise RunError(f"--user {base_url}: {exc}") from exc
