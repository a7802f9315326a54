"""What the `modal` provider does beyond the shared contract, against the fake Modal: what it asks
Modal for (resources, network, secrets, tags, runtime), worlds on Volumes, admission under the
server's limits, cancellation, the build hook, billing figures."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.modal_fake import FakeModal, host_problem
from tests.workflows.providers.kits import git, make_agent_repo, make_world, run_to_end, tree
from workflows.engine.activities import RunActivities
from workflows.prewarm.image_builder import resolve_commit
from workflows.providers.base import (
    ResourceLimits,
    SandboxCreateError,
    SandboxError,
    SandboxRateLimited,
    SandboxSpec,
)
from workflows.providers.modal import ModalConfig, ModalProvider, ModalSandbox
from workflows.providers.modal.modal_admission import AdmissionLimits
from workflows.providers.modal.modal_images import modal_image_name
from workflows.settings import Settings

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(host_problem() is not None, reason=f"fake Modal: {host_problem()}"),
]

FAST_RETRY = {"backoff_initial_s": 0.02, "backoff_max_s": 0.1}


class Env:
    """A fake Modal workspace with one built image and a world, shared by this module's tests."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.cloud_root = base / "cloud"
        self.repo = make_agent_repo(base / "agent-repo")
        self.world = make_world(base / "world")
        self.image = ""

    def cloud(self, **options: Any) -> FakeModal:
        return FakeModal(self.cloud_root, **options)

    def provider(self, cloud: FakeModal | None = None, **config: Any) -> ModalProvider:
        config.setdefault("spool_dir", self.base / "spool")
        config.setdefault("app_name", "evalbot-tests")
        return ModalProvider(cloud or self.cloud(), ModalConfig(**config))

    def spec(self, run_id: str = "exp/case/arm/0", **changes: Any) -> SandboxSpec:
        spec = SandboxSpec(
            run_id=run_id,
            image=self.image,
            world_dir=self.world,
            case_files={"case.json": b'{"id": "case-1"}'},
            limits=ResourceLimits(cpu=0.5, memory_mb=512, wall_timeout_s=30),
            labels={"experiment": "exp", "run": run_id},
        )
        return replace(spec, **changes)

    def meta(self, cloud: FakeModal, sandbox_id: str) -> dict[str, Any]:
        return dict(json.loads((cloud.root / "sandboxes" / sandbox_id / "meta.json").read_text()))


@pytest.fixture(scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    setup = Env(tmp_path_factory.mktemp("modal"))
    setup.image = await setup.provider().build_image(setup.repo, "main", "echo built > built.txt")
    yield setup


@pytest.fixture
async def sandboxes() -> AsyncIterator[list[ModalSandbox]]:
    made: list[ModalSandbox] = []
    yield made
    for sandbox in made:
        await sandbox.terminate()


# -- what the provider asks Modal for -------------------------------------------------------------


async def test_sandboxes_get_the_specs_resources_network_tags_and_secrets(
    env: Env, sandboxes: list[ModalSandbox]
) -> None:
    cloud = env.cloud()
    cloud.Secret.objects.create("llm-keys", {"OPENAI_API_KEY": "sk-test-123"}, allow_existing=True)
    provider = env.provider(cloud)
    spec = env.spec(allow_domains=("api.openai.com",), secret_groups=("llm-keys",))
    sandbox = await provider.create(spec)
    sandboxes.append(sandbox)
    meta = env.meta(cloud, sandbox.id)
    assert meta["cpu"] == [0.5, 0.5] and meta["memory"] == [512, 512]  # reserved and capped
    assert meta["outbound_domain_allowlist"] == ["api.openai.com"]
    assert meta["block_network"] is False
    assert meta["timeout"] == 30 + provider.config.timeout_margin_s
    assert meta["tags"] == {"evalbot": "run", "experiment": "exp", "run": "exp/case/arm/0"}
    assert meta["secrets"] == ["llm-keys"] and meta["runtime"] is None
    assert meta["mounts"]["/mnt/evalbot-world"]["read_only"] is True
    seen = await sandbox.exec(["sh", "-c", 'echo "$OPENAI_API_KEY $EVALBOT_WORLD_DIR"'])
    assert seen.stdout == b"sk-test-123 /world\n"


async def test_no_allowlist_blocks_the_network(env: Env, sandboxes: list[ModalSandbox]) -> None:
    cloud = env.cloud()
    sandbox = await env.provider(cloud).create(env.spec())
    sandboxes.append(sandbox)
    meta = env.meta(cloud, sandbox.id)
    assert meta["block_network"] is True and meta["outbound_domain_allowlist"] is None
    interfaces = await sandbox.exec(["sh", "-c", "ls /sys/class/net 2>/dev/null || echo none"])
    assert b"eth" not in interfaces.stdout


async def test_the_vm_runtime_is_an_option(env: Env, sandboxes: list[ModalSandbox]) -> None:
    cloud = env.cloud()
    sandbox = await env.provider(cloud, runtime="vm").create(env.spec())
    sandboxes.append(sandbox)
    assert env.meta(cloud, sandbox.id)["runtime"] == "vm"


async def test_a_missing_secret_group_fails_the_creation(env: Env) -> None:
    provider = env.provider()
    with pytest.raises(SandboxCreateError, match="never-synced"):
        await provider.create(env.spec(secret_groups=("never-synced",)))


async def test_the_engine_passes_group_names_and_for_forks_only_the_fork_safe_ones(
    env: Env, tmp_path: Path
) -> None:
    provider = env.provider()
    activities = RunActivities(
        Settings(data_dir=tmp_path),
        provider,
        store=None,
        grader=None,  # type: ignore[arg-type]
    )
    same_repo = type("Run", (), {"secret_groups_allowed": None})()
    fork = type("Run", (), {"secret_groups_allowed": ["search"]})()
    groups = ("llm-keys", "search")
    assert activities._secret_groups(groups, same_repo) == groups  # type: ignore[arg-type]
    assert activities._secret_groups(groups, fork) == ("search",)  # type: ignore[arg-type]
    assert activities._secret_env(groups, same_repo) == {}  # type: ignore[arg-type]


# -- worlds on Volumes ----------------------------------------------------------------------------


async def test_each_world_version_is_uploaded_once_and_runs_get_private_copies(
    env: Env, tmp_path: Path, sandboxes: list[ModalSandbox]
) -> None:
    world = make_world(tmp_path / "world-v1")
    (world / "nonce.txt").write_text(str(time.time_ns()))  # a version no other test uploaded
    cloud = env.cloud()
    first_provider = env.provider(cloud)
    first = await first_provider.create(env.spec(world_dir=world))
    second = await first_provider.create(env.spec(world_dir=world))
    sandboxes += [first, second]
    assert first_provider.worlds.uploads == 1
    version = await first_provider.worlds.version(world)
    volume = cloud.root / "volumes" / f"evalbot-world-{version}" / "data"
    assert tree(volume / "world") == tree(world)
    pristine = tree(volume)
    vandal = "rm -rf /world/docs; echo x > /world/new.txt; touch /mnt/evalbot-world/world/y"
    done = await first.exec(["sh", "-c", vandal])
    assert done.exit_code != 0  # the Volume is mounted read-only
    assert b"Read-only" in done.stderr or b"read-only" in done.stderr
    assert tree(volume) == pristine
    assert {i.path for i in await second.list_files("/world") if i.kind == "file"} == set(
        tree(world)
    )
    again = env.provider(cloud)  # another worker: finds the Volume complete, uploads nothing
    sandboxes.append(await again.create(env.spec(world_dir=world)))
    assert again.worlds.uploads == 0
    (world / "records.csv").write_text("id,name\n1,Acme\n2,Globex\n")  # a new world version
    changed = await again.create(env.spec(world_dir=world))
    sandboxes.append(changed)
    assert again.worlds.uploads == 1
    assert await changed.read_file("/world/records.csv") == b"id,name\n1,Acme\n2,Globex\n"


# -- admission under the server's limits ----------------------------------------------------------


async def test_refused_creations_are_retried_and_the_server_limit_holds(
    env: Env, sandboxes: list[ModalSandbox]
) -> None:
    cloud = env.cloud(create_rate_per_s=2)
    limits = AdmissionLimits(creates_per_s=0, max_starting=0, backoff_initial_s=0.25)  # no cap
    provider = env.provider(cloud, admission=limits)
    made = await asyncio.gather(*(provider.create(env.spec(f"e/c/a/{i}")) for i in range(5)))
    sandboxes += made
    assert len({s.id for s in made}) == 5
    assert provider.admission.stats.rate_limited == len(cloud.stats.rejected) > 0
    assert cloud.stats.max_per_window(1.0) <= 2


async def test_the_client_rate_avoids_refusals(env: Env, sandboxes: list[ModalSandbox]) -> None:
    cloud = env.cloud(create_rate_per_s=4)
    limits = AdmissionLimits(creates_per_s=3, max_starting=0, **FAST_RETRY)
    provider = env.provider(cloud, admission=limits)
    started = time.monotonic()
    sandboxes += await asyncio.gather(*(provider.create(env.spec(f"e/c/a/{i}")) for i in range(4)))
    assert time.monotonic() - started >= 3 * (1 / 3) * 0.95  # spaced at the client's rate
    assert cloud.stats.rejected == [] and provider.admission.stats.rate_limited == 0


async def test_persistent_refusal_is_a_rate_limited_infra_error(env: Env, tmp_path: Path) -> None:
    cloud = env.cloud(max_starting=0)  # the quota refuses everything
    limits = AdmissionLimits(creates_per_s=0, max_attempts=3, **FAST_RETRY)
    provider = env.provider(cloud, admission=limits)
    with pytest.raises(SandboxRateLimited, match="refused 3"):
        await provider.create(env.spec())
    activities = RunActivities(
        Settings(data_dir=tmp_path),
        provider,
        store=None,
        grader=None,  # type: ignore[arg-type]
    )
    from temporalio.exceptions import ApplicationError

    with pytest.raises(ApplicationError) as caught:
        await activities._create(env.spec())
    assert caught.value.type == "SandboxRateLimited" and not caught.value.non_retryable


async def test_sandboxes_starting_at_once_stay_under_the_cap(
    env: Env, sandboxes: list[ModalSandbox]
) -> None:
    cloud = env.cloud(start_latency_s=0.4)
    provider = env.provider(cloud, admission=AdmissionLimits(creates_per_s=0, max_starting=2))
    started = time.monotonic()
    sandboxes += await asyncio.gather(*(provider.create(env.spec(f"e/c/a/{i}")) for i in range(6)))
    assert provider.admission.stats.peak_starting == 2
    assert cloud.stats.peak_starting <= 2
    assert time.monotonic() - started >= 3 * 0.4  # three waves of two


# -- lifecycle ------------------------------------------------------------------------------------


async def test_a_cancelled_creation_leaves_no_sandbox_running(env: Env) -> None:
    cloud = env.cloud(start_latency_s=1.0)
    provider = env.provider(cloud)
    task = asyncio.create_task(provider.create(env.spec()))
    await asyncio.sleep(0.4)  # created on Modal, still starting
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    metas = [json.loads(p.read_text()) for p in cloud.root.glob("sandboxes/*/meta.json")]
    mine = [m for m in metas if m["created_at"] >= time.time() - 5 and m["tags"].get("run")]
    assert mine and all(m["terminated_at"] is not None for m in mine)


async def test_a_runner_that_cannot_start_is_reported(env: Env) -> None:
    provider = env.provider(python="/no/such/python3")
    provider.config = replace(provider.config, start_timeout_s=10)
    sandbox = await provider.create(env.spec())
    try:
        with pytest.raises(SandboxError, match="did not start"):
            await sandbox.start("echo hi")
    finally:
        await sandbox.terminate()


async def test_usage_reports_what_modal_bills(env: Env, sandboxes: list[ModalSandbox]) -> None:
    sandbox = await env.provider().create(env.spec())
    sandboxes.append(sandbox)
    await run_to_end(sandbox, "sleep 0.5")
    usage = await sandbox.usage()
    assert usage.sandbox_seconds >= 0.5
    assert usage.billed_cpu_seconds == pytest.approx(0.5 * usage.sandbox_seconds, rel=0.05)
    assert usage.memory_mb_seconds == pytest.approx(512 * usage.sandbox_seconds, rel=0.05)
    await sandbox.terminate()
    after = await sandbox.usage()  # still answers once the sandbox is gone (host timeout path)
    assert after.sandbox_seconds >= usage.sandbox_seconds and after.cpu_seconds == 0


async def test_iter_file_leaves_no_spool_behind(env: Env, sandboxes: list[ModalSandbox]) -> None:
    provider = env.provider()
    sandbox = await provider.create(env.spec())
    sandboxes.append(sandbox)
    await sandbox.write_file("/out/t.jsonl", b"x" * 200_000)
    chunks = [chunk async for chunk in sandbox.iter_file("/out/t.jsonl", chunk_size=50_000)]
    assert [len(c) for c in chunks] == [50_000] * 4
    assert list((env.base / "spool").iterdir()) == []


# -- images ---------------------------------------------------------------------------------------


async def test_a_published_image_is_used_without_building(env: Env) -> None:
    """The prewarm hook: an image published under modal_image_name(repo, sha) is taken as is."""
    git(env.repo, "commit", "-q", "--allow-empty", "-m", f"prewarmed {time.time_ns()}")
    sha = await resolve_commit(env.repo, "HEAD")
    cloud = env.cloud()
    await cloud.Image.from_name(env.image).publish.aio(modal_image_name(env.repo, sha))
    before = set(cloud.root.glob("sandboxes/*"))
    provider = env.provider(cloud)
    reference = await provider.build_image(env.repo, sha, "exit 1")  # would fail if it ran
    assert reference == modal_image_name(env.repo, sha)
    assert provider.images.builds == 0
    assert set(cloud.root.glob("sandboxes/*")) == before  # no build sandbox either


async def test_build_sandboxes_have_network_and_are_terminated(env: Env) -> None:
    git(env.repo, "commit", "-q", "--allow-empty", "-m", f"fresh {time.time_ns()}")
    cloud = env.cloud()
    before = set(cloud.root.glob("sandboxes/*"))
    provider = env.provider(cloud)
    await provider.build_image(env.repo, "HEAD", "true")
    (build,) = set(cloud.root.glob("sandboxes/*")) - before
    meta = env.meta(cloud, build.name)
    assert meta["tags"]["evalbot"] == "build" and meta["block_network"] is False
    assert meta["terminated_at"] is not None
