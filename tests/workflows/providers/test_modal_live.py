"""The provider conformance suite against real Modal — opt-in (docs/modal.md, "Live tests").

    MODAL_TOKEN_ID=... MODAL_TOKEN_SECRET=... .venv/bin/python -m pytest -m live \
        tests/workflows/providers/test_modal_live.py

Everything here carries the `live` marker and skips cleanly unless both token variables are set and
the run selected the marker (`-m live`), so neither `make test` nor a developer with Modal
credentials in the environment talks to Modal by accident. It creates sandboxes, a published image
and a world Volume in the App named by EVALBOT_MODAL_APP_NAME (default `evalbot-conformance`) of
the token's workspace; the sandboxes are terminated, the image and Volume are kept for reuse.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from tests.workflows.providers import test_conformance as conformance
from tests.workflows.providers.kits import Kit, make_agent_repo, make_world
from workflows.providers.base import SandboxProvider
from workflows.providers.modal import ModalConfig, ModalProvider

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

# Needs a worker process of its own building the kit from KIT_MAKERS; on Modal a sandbox outlives
# any worker anyway, and test_attach_from_a_fresh_provider_finds_the_runner covers reattaching.
NOT_LIVE = {"test_runner_survives_the_worker_that_started_it"}


def live_skip_reason(config: pytest.Config) -> str | None:
    if not (os.environ.get("MODAL_TOKEN_ID") and os.environ.get("MODAL_TOKEN_SECRET")):
        return "live Modal tests need MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"
    expression = str(config.getoption("markexpr") or "")
    if "live" not in expression or "not live" in expression:
        return "live Modal tests run only when selected: pytest -m live"
    return None


@pytest.fixture(scope="module")
async def kit(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Kit]:
    """Overrides the suite's kits (conftest.py) with one on real Modal."""
    reason = live_skip_reason(request.config)
    if reason:
        pytest.skip(reason)
    import modal

    base = tmp_path_factory.mktemp("kit-modal-live")
    app_name = os.environ.get("EVALBOT_MODAL_APP_NAME", "evalbot-conformance")

    def make() -> SandboxProvider:
        return ModalProvider(modal, ModalConfig(app_name=app_name, spool_dir=base / "spool"))

    repo = make_agent_repo(base / "agent-repo")
    image = await make().build_image(repo, "main", "echo built > built.txt")
    world = make_world(base / "world")
    yield Kit("modal-live", base, make, repo, image, world, host_processes=False)


new_sandbox = conformance.new_sandbox
for _name in dir(conformance):
    if _name.startswith("test_") and _name not in NOT_LIVE:
        globals()[_name] = getattr(conformance, _name)


def test_the_live_variant_skips_cleanly_without_credentials(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    assert "MODAL_TOKEN_ID" in str(live_skip_reason(request.config))
