"""Why an episode ended, and which endings earn credit or are left out (no heavy imports: rewards use it)."""

from __future__ import annotations

from enum import Enum


class Termination(str, Enum):  # str: stored as JSON in rollout_infos and reports
    USER_STOP = "user_stop"  # the user said ###STOP###
    USER_TRANSFER = "user_transfer"  # ###TRANSFER###
    USER_OUT_OF_SCOPE = "user_out_of_scope"  # ###OUT-OF-SCOPE###
    AGENT_STOP = "agent_stop"  # the agent said ###STOP###
    AGENT_TRANSFER = "agent_transfer"  # a successful call of the domain's stop tool (transfer to a human)
    MAX_TURNS = "max_turns"
    TOKEN_BUDGET = "token_budget"
    ERROR_BUDGET = "error_budget"
    LENGTH = "length"  # the last message hit max_completion_length
    EMPTY_REPLY = "empty_reply"  # the agent's message had no text and no tool call: its own ending, scored 0
    USER_SIM_ERROR = "user_sim_error"  # the simulator failed after its retries: not the policy's fault
    AGENT_ERROR = "agent_error"  # the agent's endpoint failed (synthesis, evaluation): not the policy's fault either
    ENV_ERROR = "env_error"  # the tools' server was unreachable or went away mid-episode (MCP): infrastructure too
    TOOL_SIM_ERROR = "tool_sim_error"  # a simulated tool gave no usable answer after its retries (B1): the same
    USER_SIM_MISTAKE = "user_sim_mistake"  # the user review flagged the simulated user (rollout.user_review: exclude)


# Endings that are the conversation's own; tau2-bench scores every other ending 0.
NATURAL = frozenset(
    {
        Termination.USER_STOP,
        Termination.USER_TRANSFER,
        Termination.USER_OUT_OF_SCOPE,
        Termination.AGENT_STOP,
        Termination.AGENT_TRANSFER,
    }
)
# Endings caused by infrastructure: left out of training and of metrics, never scored 0.
EXCLUDED = frozenset(
    {
        Termination.USER_SIM_ERROR,
        Termination.USER_SIM_MISTAKE,
        Termination.AGENT_ERROR,
        Termination.ENV_ERROR,
        Termination.TOOL_SIM_ERROR,
    }
)
