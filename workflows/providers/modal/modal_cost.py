"""Sandbox cost per run, from what the provider bills and the price table in settings.

`ResourceUsage` carries what a metered provider bills (base.py: `billed_cpu_seconds`,
`memory_mb_seconds`, `sandbox_seconds`; the `modal` provider fills them from the reservation over
the sandbox's life, since Modal bills the greater of reserved and used). The estimate is

    cost = billed CPU core-seconds x cpu_core_s + memory GiB-seconds x memory_gib_s

with prices per provider from `settings.sandbox.prices` (Modal's published sandbox rates by
default). Providers without an entry (local, process) cost nothing. It is an estimate: the sandbox
also lives through collect and teardown after `usage()` is read, and Modal's own figure
(`Sandbox._experimental_stats`, minutes late) is the bill.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.records import SandboxUsage

MIB_PER_GIB = 1024


def _number(mapping: Mapping[str, Any], key: str) -> float:
    value = mapping.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def sandbox_usage(usage: Mapping[str, Any], price: Mapping[str, float]) -> SandboxUsage:
    """`usage` is `dataclasses.asdict(ResourceUsage)` (what the execute stage returns)."""
    cpu = _number(usage, "cpu_seconds")
    billed_cpu = _number(usage, "billed_cpu_seconds") or cpu
    memory_gib_s = _number(usage, "memory_mb_seconds") / MIB_PER_GIB
    cost = billed_cpu * _number(price, "cpu_core_s") + memory_gib_s * _number(price, "memory_gib_s")
    return SandboxUsage(
        cpu_seconds=round(cpu, 3),
        billed_cpu_seconds=round(billed_cpu, 3),
        memory_gib_seconds=round(memory_gib_s, 3),
        sandbox_seconds=round(_number(usage, "sandbox_seconds"), 3),
        cost_usd=round(cost, 8),
    )
