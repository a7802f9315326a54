"""Admission control of sandbox creation (workflows/providers/modal/modal_admission.py)."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from workflows.providers.base import SandboxError, SandboxRateLimited
from workflows.providers.modal.modal_admission import Admission, AdmissionLimits, TokenBucket
from workflows.settings import Settings


class Refused(Exception):
    """What the provider raises for a rate limit or quota (Modal: ResourceExhaustedError)."""


class Clock:
    """Virtual time: sleeping advances it, nothing waits for real."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def admission(clock: Clock, **limits: float) -> Admission:
    return Admission(
        AdmissionLimits(**limits),  # type: ignore[arg-type]
        lambda error: isinstance(error, Refused),
        clock=clock,
        sleep=clock.sleep,
        jitter=lambda: 1.0,
    )


def max_in_window(times: list[float], window: float = 1.0) -> int:
    ordered, best, start = sorted(times), 0, 0
    for end, moment in enumerate(ordered):
        while moment - ordered[start] >= window - 1e-9:
            start += 1
        best = max(best, end - start + 1)
    return best


async def test_the_bucket_spaces_creations_at_the_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(5.0, clock, clock.sleep)
    taken = []
    for _ in range(23):
        await bucket.take()
        taken.append(clock.now)
    assert max_in_window(taken) == 5
    assert taken[-1] - taken[0] == pytest.approx(22 * 0.2)


async def test_concurrent_callers_are_served_in_order_without_bursts() -> None:
    clock = Clock()
    gate = admission(clock, creates_per_s=4.0, max_starting=0)
    times: list[float] = []

    async def make() -> int:
        times.append(clock.now)
        return len(times)

    made = await asyncio.gather(*(gate.create(make) for _ in range(12)))
    assert sorted(made) == list(range(1, 13))
    assert max_in_window(times) == 4
    assert gate.stats.created == 12 and gate.stats.rate_limited == 0


async def test_no_rate_means_no_waiting() -> None:
    clock = Clock()
    gate = admission(clock, creates_per_s=0.0, max_starting=0)

    async def make() -> None:
        return None

    await asyncio.gather(*(gate.create(make) for _ in range(50)))
    assert clock.slept == [] and gate.stats.bucket_wait_s == 0


async def test_refusals_are_retried_with_growing_backoff() -> None:
    clock = Clock()
    gate = admission(clock, creates_per_s=0.0, backoff_initial_s=0.5, backoff_max_s=3.0)
    answers = iter([Refused(), Refused(), Refused(), Refused(), "sandbox"])

    async def make() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert await gate.create(make) == "sandbox"
    assert clock.slept == [0.5, 1.0, 2.0, 3.0]  # doubling, capped (jitter pinned at 1.0)
    assert gate.stats.rate_limited == 4 and gate.stats.created == 1


async def test_backoff_has_full_jitter_with_a_floor() -> None:
    limits = AdmissionLimits(backoff_initial_s=1.0, backoff_max_s=30.0)
    low = Admission(limits, lambda e: True, jitter=lambda: 0.0)
    mid = Admission(limits, lambda e: True, jitter=lambda: 0.5)
    assert low.backoff(3) == pytest.approx(0.8)  # a tenth of 8 s at least
    assert mid.backoff(3) == pytest.approx(4.0)
    assert mid.backoff(10) == pytest.approx(15.0)  # half of the 30 s cap


async def test_giving_up_is_an_infrastructure_error() -> None:
    clock = Clock()
    gate = admission(clock, creates_per_s=0.0, max_attempts=3, backoff_initial_s=0.1)

    async def make() -> None:
        raise Refused("Sandbox creation rate limit exceeded")

    with pytest.raises(SandboxRateLimited, match="refused 3 sandbox creations") as caught:
        await gate.create(make)
    assert isinstance(caught.value, SandboxError)  # infra, never the agent's failure
    assert gate.stats.gave_up == 1 and gate.stats.rate_limited == 3


async def test_other_errors_are_not_retried() -> None:
    gate = admission(Clock(), creates_per_s=0.0)
    calls = 0

    async def make() -> None:
        nonlocal calls
        calls += 1
        raise ValueError("bad image")

    with pytest.raises(ValueError, match="bad image"):
        await gate.create(make)
    assert calls == 1 and gate.stats.rate_limited == 0


async def test_the_starting_gate_caps_sandboxes_starting_at_once() -> None:
    gate = Admission(AdmissionLimits(creates_per_s=0.0, max_starting=3), lambda e: False)
    inside = 0
    seen = 0

    async def start_one() -> None:
        nonlocal inside, seen
        async with gate.starting():
            inside += 1
            seen = max(seen, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(start_one() for _ in range(20)))
    assert seen == 3 and gate.stats.peak_starting == 3 and gate.stats.starting == 0


async def test_a_failed_start_frees_its_slot() -> None:
    gate = Admission(AdmissionLimits(creates_per_s=0.0, max_starting=1), lambda e: False)
    with pytest.raises(RuntimeError):
        async with gate.starting():
            raise RuntimeError("setup failed")
    async with asyncio.timeout(1):
        async with gate.starting():
            pass


async def test_a_stalled_event_loop_does_not_release_a_burst() -> None:
    """Real clock: takers that overslept (the loop was blocked) still leave 1/rate apart."""
    bucket = TokenBucket(20.0)
    released: list[float] = []

    async def taker() -> None:
        await bucket.take()
        released.append(time.monotonic())

    tasks = [asyncio.create_task(taker()) for _ in range(8)]
    await asyncio.sleep(0.12)
    time.sleep(0.3)  # noqa: ASYNC251 - the point: block the loop while takers are due
    await asyncio.gather(*tasks)
    gaps = [b - a for a, b in itertools.pairwise(released)]
    assert min(gaps) >= 0.05 * 0.95, gaps


def test_the_modal_provider_takes_its_admission_limits_from_settings(tmp_path: Path) -> None:
    import modal

    from workflows.providers import create_provider
    from workflows.providers.modal import ModalProvider

    settings = Settings(
        data_dir=tmp_path,
        sandbox={"provider": "modal"},
        modal={"creates_per_s": 2.5, "max_starting": 40, "create_attempts": 3, "runtime": "vm"},
    )
    provider = create_provider(settings)  # builds on the real SDK; talks to nobody yet
    assert isinstance(provider, ModalProvider) and provider.sdk is modal
    assert provider.admission.limits == AdmissionLimits(
        creates_per_s=2.5, max_starting=40, max_attempts=3
    )
    assert provider.config.runtime == "vm" and provider.config.app_name == "evalbot"
    assert not provider.quick_provision and provider.injects_secret_groups
