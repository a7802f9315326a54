"""Fixtures of the provider suites: one kit per provider (kits.py), built once per session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.workflows.providers.kits import (
    KIT_MAKERS,
    Kit,
    make_agent_repo,
    make_world,
    skip_reason,
)
from workflows.providers.common.native_runner import find_compiler, native_launcher, native_runner
from workflows.providers.local import LocalProvider
from workflows.providers.modal import ModalSandbox


async def build_kit(name: str, base: Path) -> Kit:
    make = KIT_MAKERS[name](base)
    repo = make_agent_repo(base / "agent-repo")
    provider = make()
    image = await provider.build_image(repo, "main", "echo built > built.txt")
    return Kit(name, base, make, repo, image, make_world(base / "world"))


@pytest.fixture(scope="session", params=sorted(KIT_MAKERS))
async def kit(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Kit]:
    name = str(request.param)
    reason = skip_reason(name)
    if reason:
        pytest.skip(f"{name} provider unavailable: {reason}")
    if name == "modal":
        request.getfixturevalue("modal_server")  # the real SDK talks to it
    yield await build_kit(name, tmp_path_factory.mktemp(f"kit-{name}"))


@pytest.fixture(scope="session")
async def local_kit(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Kit]:
    reason = skip_reason("local")
    if reason:
        pytest.skip(f"local provider unavailable: {reason}")
    yield await build_kit("local", tmp_path_factory.mktemp("kit-local-hostile"))


@pytest.fixture(scope="session", params=["cgroups", "no-cgroups", "python runner"])
def mode_kit(request: pytest.FixtureRequest, local_kit: Kit) -> Kit:
    """The `local` provider with this host's cgroups; forced into no-cgroup mode
    (EVALBOT_SANDBOX_CGROUPS=none: rlimits, docs/sandbox.md); and with the Python runner and a
    forking spawner, as on a host without a C compiler (native_runner.py) — over the same folders
    and image: hostile agents meet all three."""
    if request.param == "cgroups":
        return local_kit
    base = local_kit.base
    options: dict[str, Any] = (
        {"cgroups": "none"} if request.param == "no-cgroups" else {"native": False}
    )

    def make() -> LocalProvider:
        sandboxes, images = base / "sandboxes", base / "images"
        return LocalProvider(sandboxes, images, start_timeout_s=20, **options)

    return Kit("local", base, make, local_kit.repo, local_kit.image, local_kit.world)


@pytest.fixture
async def sandboxes() -> AsyncIterator[list[ModalSandbox]]:
    """Modal sandboxes a test made: terminated after it, whatever happened."""
    made: list[ModalSandbox] = []
    yield made
    for sandbox in made:
        await sandbox.terminate()


@pytest.fixture(scope="session")
def native_programs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The native runner and launcher (common/native_runner.py), compiled once per session."""
    if find_compiler() is None:
        pytest.skip("no C compiler here: providers run the Python runner and fork the spawner")
    folder = tmp_path_factory.mktemp("native")
    runner, launcher = native_runner(folder), native_launcher(folder)
    assert runner is not None and launcher is not None, "runner.c or launch.c did not compile"
    return runner, launcher
