"""Classify how a run ended from the runner's state file and the sandbox's accounting."""

from __future__ import annotations

from typing import Any

from workflows.records import RunStatus


def classify(
    state: dict[str, Any], usage: dict[str, Any], *, host_timeout: bool, has_answer: bool
) -> tuple[RunStatus, str]:
    """(status, one-sentence reason). `scored` means: fit to be graded."""
    termination = state.get("termination")
    exit_code = state.get("exit_code")
    if host_timeout or termination == "timeout":
        return RunStatus.TIMEOUT, "the agent did not finish within its time limit"
    if usage.get("oom_killed"):
        return RunStatus.OUT_OF_MEMORY, "the agent was killed by the memory limit"
    if termination == "output_limit":
        return RunStatus.RESOURCE_LIMIT, "the agent printed more than the output limit"
    if exit_code != 0 and usage.get("pids_limit_hit"):
        return RunStatus.RESOURCE_LIMIT, "the agent hit the process limit"
    if termination == "killed" or exit_code is None:
        return RunStatus.AGENT_ERROR, f"the agent was killed (signal {state.get('signal')})"
    if exit_code != 0:
        return RunStatus.AGENT_ERROR, f"the agent exited with code {exit_code}"
    if not has_answer:
        return RunStatus.OUTPUT_ERROR, "the agent exited cleanly but wrote no answer"
    return RunStatus.SCORED, ""
