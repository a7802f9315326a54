"""Two `modal` providers (as in two workers) sharing one creation rate through the store
(bot.composition.share_creation_rate; docs/modal.md, "Limits across workers"): the Modal test
server, which here only counts creations, sees the cluster's rate, not twice it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.composition import open_store, share_creation_rate
from tests.fakes.modal_server.fixture import ModalTestServer
from tests.workflows.providers.modal_env import FAST_RETRY, ModalEnv
from workflows.providers.modal import ModalProvider, ModalSandbox
from workflows.providers.modal.modal_admission import AdmissionLimits
from workflows.settings import Settings

pytestmark = [pytest.mark.timeout(180)]

RATE = 2.0  # creations per second, for both providers together
EACH = 3


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, modal_server: ModalTestServer
) -> AsyncIterator[ModalEnv]:
    setup = ModalEnv(tmp_path_factory.mktemp("modal"), modal_server, "evalbot-test-shared-rate")
    setup.image = await setup.provider().build_image(setup.repo, "main", "true")
    yield setup


def worker_provider(env: ModalEnv, settings: Settings) -> ModalProvider:
    """A provider as a worker gets it: its own bucket at the rate, then the cluster's shared."""
    limits = AdmissionLimits(creates_per_s=RATE, max_starting=0, **FAST_RETRY)
    provider = env.provider(admission=limits)
    share_creation_rate(provider, settings, open_store(settings))
    return provider


async def test_two_providers_share_the_creation_rate(
    env: ModalEnv, sandboxes: list[ModalSandbox], tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "evalbot", modal={"creates_per_s": RATE})
    first, second = worker_provider(env, settings), worker_provider(env, settings)
    specs = [env.spec(f"e/c/a/{i}") for i in range(2 * EACH)]
    with env.knobs(create_rate_per_s=None, max_starting=None):  # the server only counts
        started = time.monotonic()
        sandboxes += await asyncio.gather(
            *(first.create(spec) for spec in specs[:EACH]),
            *(second.create(spec) for spec in specs[EACH:]),
        )
        took = time.monotonic() - started
        seen = env.server.stats()
    assert seen["created"] == 2 * EACH and seen["refused"] == 0
    # one bucket: 6 creations at 2/s span 2.5 s, at most 2 (+ jitter) in any second; two
    # per-process buckets would make 4 in the first half second
    assert seen["max_per_1s"] <= RATE + 1
    assert took >= (2 * EACH - 1) / RATE - 0.2
