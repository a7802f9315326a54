"""Sandbox cost per run (workflows/providers/modal/modal_cost.py) and where the report shows it."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from tests.support.experiments import all_runs, binary_effect, make_spec
from workflows.providers.base import ResourceUsage
from workflows.providers.modal.modal_cost import sandbox_usage
from workflows.records import SandboxUsage
from workflows.report import build_report
from workflows.settings import Settings

MODAL = Settings().sandbox.prices["modal"]


def test_cost_is_billed_core_seconds_and_gib_seconds_at_the_table_price() -> None:
    usage = ResourceUsage(
        cpu_seconds=12.0,
        sandbox_seconds=100.0,
        billed_cpu_seconds=100.0,  # 1 core reserved for 100 s: more than the 12 s used
        memory_mb_seconds=2048 * 100.0,
    )
    record = sandbox_usage(asdict(usage), MODAL)
    assert record.billed_cpu_seconds == 100.0 and record.memory_gib_seconds == 200.0
    assert record.cost_usd == pytest.approx(100 * 0.00003942 + 200 * 0.00000672)
    assert record.cpu_seconds == 12.0 and record.sandbox_seconds == 100.0


def test_providers_without_a_price_cost_nothing() -> None:
    local = sandbox_usage(asdict(ResourceUsage(cpu_seconds=3.5)), {})
    assert local == SandboxUsage(cpu_seconds=3.5, billed_cpu_seconds=3.5)
    assert "local" not in Settings().sandbox.prices


def test_malformed_usage_counts_as_zero() -> None:
    odd = sandbox_usage({"cpu_seconds": "lots", "memory_mb_seconds": None, "x": 1}, MODAL)
    assert odd == SandboxUsage()


def test_the_price_table_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "EVALBOT_SANDBOX_PRICES", '{"modal": {"cpu_core_s": 0.001, "memory_gib_s": 0.0}}'
    )
    price = Settings().sandbox.prices["modal"]
    assert sandbox_usage({"billed_cpu_seconds": 10.0}, price).cost_usd == pytest.approx(0.01)


def test_the_report_shows_sandbox_cost_beside_the_agents_cost() -> None:
    spec = make_spec(n_cases=4, trials=2)
    runs = [
        run.model_copy(
            update={"sandbox": SandboxUsage(cost_usd=0.002 if run.arm == "main" else 0.003)}
        )
        for run in all_runs(spec, binary_effect(0.0))
    ]
    report = build_report(spec, runs)
    main, pr = report.summaries
    assert main.sandbox_cost_usd == pytest.approx(0.002 * 8)
    assert pr.mean_sandbox_cost_usd == pytest.approx(0.003)
    metrics = [c.metric for c in report.comparisons[0].resources]
    assert metrics[:2] == ["cost / run", "sandbox cost / run"]
    row = report.comparisons[0].resources[1]
    assert row.change == pytest.approx(0.5)


def test_no_sandbox_cost_no_row() -> None:
    spec = make_spec(n_cases=4, trials=2)
    report = build_report(spec, all_runs(spec, binary_effect(0.0)))
    assert "sandbox cost / run" not in [c.metric for c in report.comparisons[0].resources]
    assert report.summaries[0].sandbox_cost_usd == 0.0
