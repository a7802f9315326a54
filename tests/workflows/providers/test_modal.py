"""What the `modal` provider does beyond the shared contract, on the real `modal` SDK against the
Modal test server (tests/fakes/modal_server): what it asks Modal for (resources, network, secrets,
tags, runtime), worlds on Volumes, admission under the server's limits, cancellation, billing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import modal
import pytest

from tests.fakes.modal_server.fixture import ModalTestServer
from tests.workflows.providers.kits import make_world, run_to_end, tree
from tests.workflows.providers.modal_env import FAST_RETRY, ModalEnv
from workflows.engine.activities import RunActivities
from workflows.providers.base import (
    SandboxCreateError,
    SandboxError,
    SandboxFileError,
    SandboxRateLimited,
)
from workflows.providers.modal import ModalSandbox, modal_files
from workflows.providers.modal.modal_admission import AdmissionLimits
from workflows.settings import Settings

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, modal_server: ModalTestServer
) -> AsyncIterator[ModalEnv]:
    setup = ModalEnv(tmp_path_factory.mktemp("modal"), modal_server, "evalbot-test-modal")
    setup.image = await setup.provider().build_image(setup.repo, "main", "echo built > built.txt")
    yield setup


# -- what the provider asks Modal for -------------------------------------------------------------


async def test_sandboxes_get_the_specs_resources_network_tags_and_secrets(
    env: ModalEnv, sandboxes: list[ModalSandbox]
) -> None:
    await modal.Secret.objects.create.aio(
        "llm-keys", {"OPENAI_API_KEY": "sk-test-123"}, allow_existing=True
    )
    provider = env.provider()
    spec = env.spec(allow_domains=("api.openai.com",), secret_groups=("llm-keys",))
    sandbox = await provider.create(spec)
    sandboxes.append(sandbox)
    meta = env.meta(sandbox.id)
    assert meta["cpu"] == [0.5, 0.5] and meta["memory"] == [512, 512]  # reserved and capped
    assert meta["outbound_domain_allowlist"] == ["api.openai.com"]
    assert meta["block_network"] is False
    assert meta["timeout"] == 30 + provider.config.timeout_margin_s
    assert meta["tags"] == {"evalbot": "run", "experiment": "exp", "run": "exp/case/arm/0"}
    assert meta["secrets"] == ["llm-keys"] and meta["runtime"] is None
    assert meta["mounts"]["/mnt/evalbot-world"]["read_only"] is True
    seen = await sandbox.exec(["sh", "-c", 'echo "$OPENAI_API_KEY $EVALBOT_WORLD_DIR"'])
    assert seen.stdout == b"sk-test-123 /world\n"


async def test_no_allowlist_blocks_the_network(
    env: ModalEnv, sandboxes: list[ModalSandbox]
) -> None:
    sandbox = await env.provider().create(env.spec())
    sandboxes.append(sandbox)
    meta = env.meta(sandbox.id)
    assert meta["block_network"] is True and meta["outbound_domain_allowlist"] is None
    interfaces = await sandbox.exec(["sh", "-c", "ls /sys/class/net 2>/dev/null || echo none"])
    assert b"eth" not in interfaces.stdout


async def test_the_vm_runtime_is_an_option(env: ModalEnv, sandboxes: list[ModalSandbox]) -> None:
    sandbox = await env.provider(runtime="vm").create(env.spec())
    sandboxes.append(sandbox)
    assert env.meta(sandbox.id)["runtime"] == "vm"


# -- bad input: one sentence naming the object and the fix, an infrastructure error ---------------


async def test_a_missing_secret_group_fails_the_creation(env: ModalEnv) -> None:
    provider = env.provider()
    with pytest.raises(SandboxCreateError, match=r"never-synced.*EVALBOT_SECRETS_SINK=modal"):
        await provider.create(env.spec(secret_groups=("never-synced",)))


async def test_a_volume_that_cannot_be_created_names_the_world(
    env: ModalEnv, tmp_path: Path
) -> None:
    world = make_world(tmp_path / "unwritable-world")
    (world / "nonce.txt").write_text(str(time.time_ns()))  # a version not uploaded yet
    provider = env.provider()
    faults = {"VolumeGetOrCreate": "volume quota exceeded"}
    with env.knobs(faults=faults), pytest.raises(SandboxCreateError) as caught:
        await provider.create(env.spec(world_dir=world))
    assert "world unwritable-world" in str(caught.value)
    assert "volume quota exceeded" in str(caught.value)


async def test_a_token_the_server_rejects_is_one_sentence_with_the_fix(
    env: ModalEnv,
) -> None:
    provider = env.provider(app_name=f"evalbot-rejected-{time.time_ns()}")
    faults = {"AppGetOrCreate": "UNAUTHENTICATED: Invalid token"}
    with env.knobs(faults=faults), pytest.raises(SandboxCreateError) as caught:
        await provider.create(env.spec())
    message = str(caught.value)
    assert "Modal rejected the token" in message and "MODAL_TOKEN_ID" in message
    assert "\n" not in message


async def test_the_engine_passes_group_names_and_for_forks_only_the_fork_safe_ones(
    env: ModalEnv, tmp_path: Path
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
    env: ModalEnv, tmp_path: Path, sandboxes: list[ModalSandbox]
) -> None:
    world = make_world(tmp_path / "world-v1")
    (world / "nonce.txt").write_text(str(time.time_ns()))  # a version no other test uploaded
    first_provider = env.provider()
    first = await first_provider.create(env.spec(world_dir=world))
    second = await first_provider.create(env.spec(world_dir=world))
    sandboxes += [first, second]
    assert first_provider.worlds.uploads == 1
    version = await first_provider.worlds.version(world)
    volume = env.server.cloud.root / "volumes" / f"evalbot-world-{version}" / "data"
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
    again = env.provider()  # another worker: finds the Volume complete, uploads nothing
    sandboxes.append(await again.create(env.spec(world_dir=world)))
    assert again.worlds.uploads == 0
    (world / "records.csv").write_text("id,name\n1,Acme\n2,Globex\n")  # a new world version
    changed = await again.create(env.spec(world_dir=world))
    sandboxes.append(changed)
    assert again.worlds.uploads == 1
    assert await changed.read_file("/world/records.csv") == b"id,name\n1,Acme\n2,Globex\n"


# -- admission under the server's limits (counted by the server, not by us) ----------------------


async def test_refused_creations_are_retried_and_the_server_limit_holds(
    env: ModalEnv, sandboxes: list[ModalSandbox]
) -> None:
    limits = AdmissionLimits(creates_per_s=0, max_starting=0, backoff_initial_s=0.25)  # no cap
    provider = env.provider(admission=limits)
    with env.knobs(create_rate_per_s=2):
        made = await asyncio.gather(*(provider.create(env.spec(f"e/c/a/{i}")) for i in range(5)))
        sandboxes += made
        seen = env.server.stats()
    assert len({s.id for s in made}) == 5 and seen["created"] == 5
    assert provider.admission.stats.rate_limited == seen["refused"] > 0
    assert seen["max_per_1s"] <= 2


async def test_the_client_rate_avoids_refusals(
    env: ModalEnv, sandboxes: list[ModalSandbox]
) -> None:
    limits = AdmissionLimits(creates_per_s=3, max_starting=0, **FAST_RETRY)
    provider = env.provider(admission=limits)
    with env.knobs(create_rate_per_s=4):
        started = time.monotonic()
        sandboxes += await asyncio.gather(
            *(provider.create(env.spec(f"e/c/a/{i}")) for i in range(4))
        )
        took = time.monotonic() - started
        seen = env.server.stats()
    assert took >= 3 * (1 / 3) * 0.95  # spaced at the client's rate
    assert seen["refused"] == 0 and provider.admission.stats.rate_limited == 0


async def test_persistent_refusal_is_a_rate_limited_infra_error(
    env: ModalEnv, tmp_path: Path
) -> None:
    limits = AdmissionLimits(creates_per_s=0, max_attempts=3, **FAST_RETRY)
    provider = env.provider(admission=limits)
    activities = RunActivities(
        Settings(data_dir=tmp_path),
        provider,
        store=None,
        grader=None,  # type: ignore[arg-type]
    )
    from temporalio.exceptions import ApplicationError

    with env.knobs(max_starting=0):  # the quota refuses everything
        with pytest.raises(SandboxRateLimited, match="refused 3"):
            await provider.create(env.spec())
        with pytest.raises(ApplicationError) as caught:
            await activities._create(env.spec())
        refused = env.server.stats()["refused"]
    assert caught.value.type == "SandboxRateLimited" and not caught.value.non_retryable
    assert refused == 6  # three tries each, every one refused by the server


async def test_sandboxes_starting_at_once_stay_under_the_cap(
    env: ModalEnv, sandboxes: list[ModalSandbox]
) -> None:
    provider = env.provider(admission=AdmissionLimits(creates_per_s=0, max_starting=2))
    with env.knobs(start_latency_s=0.4):
        started = time.monotonic()
        sandboxes += await asyncio.gather(
            *(provider.create(env.spec(f"e/c/a/{i}")) for i in range(6))
        )
        took = time.monotonic() - started
        seen = env.server.stats()
    assert provider.admission.stats.peak_starting == 2
    assert seen["peak_starting"] <= 2
    assert took >= 3 * 0.4  # three waves of two


# -- lifecycle ------------------------------------------------------------------------------------


async def test_a_cancelled_creation_leaves_no_sandbox_running(env: ModalEnv) -> None:
    provider = env.provider()
    before = env.sandbox_ids()
    with env.knobs(start_latency_s=1.0):
        task = asyncio.create_task(provider.create(env.spec("cancelled/c/a/0")))
        await asyncio.sleep(0.4)  # created on Modal, still starting
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    mine = env.sandbox_ids() - before
    assert mine and all(env.meta(i)["terminated_at"] is not None for i in mine)


async def test_a_runner_that_cannot_start_is_reported(env: ModalEnv) -> None:
    provider = env.provider(python="/no/such/python3")
    provider.config = replace(provider.config, start_timeout_s=10)
    sandbox = await provider.create(env.spec())
    try:
        with pytest.raises(SandboxError, match="did not start"):
            await sandbox.start("echo hi")
    finally:
        await sandbox.terminate()


async def test_usage_reports_what_modal_bills(env: ModalEnv, sandboxes: list[ModalSandbox]) -> None:
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


async def test_iter_file_leaves_no_spool_behind(
    env: ModalEnv, sandboxes: list[ModalSandbox]
) -> None:
    provider = env.provider()
    sandbox = await provider.create(env.spec())
    sandboxes.append(sandbox)
    await sandbox.write_file("/out/t.jsonl", b"x" * 200_000)
    chunks = [chunk async for chunk in sandbox.iter_file("/out/t.jsonl", chunk_size=50_000)]
    assert [len(c) for c in chunks] == [50_000] * 4
    assert list((env.base / "spool").iterdir()) == []


# -- filesystem calls -----------------------------------------------------------------------------


async def filesystem_calls(server: ModalTestServer, action: Any) -> int:
    """Execs the server received while `action` ran: each filesystem call is one (the SDK runs
    Modal's filesystem tool in the sandbox). The server writes its counts every second."""
    await asyncio.sleep(1.2)
    before = server.rpc_counts().get("TaskExecStart", 0)
    await action()
    await asyncio.sleep(1.2)
    return server.rpc_counts().get("TaskExecStart", 0) - before


async def test_files_of_a_fresh_listing_are_read_with_one_call_each(
    env: ModalEnv, sandboxes: list[ModalSandbox], modal_server: ModalTestServer
) -> None:
    """Collecting (list, then read each file) does not `stat` again what the listing saw: one
    call per file, where checking each path component first took three or four."""
    sandbox = await env.provider().create(env.spec())
    sandboxes.append(sandbox)
    await run_to_end(sandbox, "mkdir -p /out/a/b && for f in x y z; do echo $f > /out/a/b/$f; done")
    listed = await sandbox.list_files("/out")
    names = sorted(info.path for info in listed if info.path.startswith("a/b/"))
    assert names == ["a/b/x", "a/b/y", "a/b/z"]
    read: list[bytes] = []

    async def read_all() -> None:
        read.extend([await sandbox.read_file(f"/out/{name}") for name in names])

    assert await filesystem_calls(modal_server, read_all) == 3
    assert read == [b"x\n", b"y\n", b"z\n"]


async def test_after_a_listing_goes_stale_every_component_is_checked_again(
    env: ModalEnv, sandboxes: list[ModalSandbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(modal_files, "LISTING_FRESH_S", 0.0)
    sandbox = await env.provider().create(env.spec())
    sandboxes.append(sandbox)
    await run_to_end(sandbox, "mkdir -p /out/a /tmp/elsewhere && echo x > /tmp/elsewhere/f")
    await sandbox.list_files("/out")
    swap = await sandbox.exec(["sh", "-c", "rmdir /out/a && ln -s /tmp/elsewhere /out/a"])
    assert swap.exit_code == 0
    with pytest.raises(SandboxFileError, match="symlink"):
        await sandbox.read_file("/out/a/f")
