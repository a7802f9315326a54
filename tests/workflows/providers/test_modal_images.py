"""Images of the `modal` provider on the real SDK against the Modal test server: published names
found without `Image.hydrate` (which the SDK refuses for images), build sandboxes with the build
allowlist only, and prewarm → reset to a later commit → run, as docs/modal.md ("Images") says."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import modal
import pytest

from tests.fakes.modal_server.fixture import ModalTestServer
from tests.workflows.providers.histories import make_history
from tests.workflows.providers.kits import git
from tests.workflows.providers.modal_env import ModalEnv
from workflows.prewarm.image_builder import resolve_commit
from workflows.prewarm.image_label import image_path, split_reference
from workflows.providers.base import SandboxCreateError
from workflows.providers.modal import ModalProvider
from workflows.providers.modal.modal_images import modal_image_name, prewarm_image_name

pytestmark = [pytest.mark.timeout(240)]

SETUP = "echo setup >> .built-by && cat src/*.txt > all.txt"  # evalbot.toml's, as the job runs it
# Every regular file below /repo but .git, with its hash: the tree as a checkout would have it.
TREE = (
    "cd /repo && find . -path ./.git -prune -o \\( -type f -o -type l \\) -print | LC_ALL=C sort"
    ' | while read -r f; do if [ -L "$f" ]; then echo "$f -> $(readlink "$f")";'
    ' else echo "$f $(sha256sum < "$f" | cut -c1-16)"; fi; done'
)


@pytest.fixture(scope="module")
async def env(
    tmp_path_factory: pytest.TempPathFactory, modal_server: ModalTestServer
) -> AsyncIterator[ModalEnv]:
    setup = ModalEnv(tmp_path_factory.mktemp("modal-images"), modal_server, "evalbot-test-images")
    setup.image = await setup.provider().build_image(setup.repo, "main", "echo built > built.txt")
    yield setup


def build_sandboxes(env: ModalEnv, before: set[str]) -> list[dict[str, object]]:
    metas = [env.meta(i) for i in env.sandbox_ids() - before]
    return [m for m in metas if m["tags"].get("evalbot") == "build"]  # type: ignore[attr-defined]


def local_tree(repo: Path, commit: str, into: Path) -> str:
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "-q", "--detach", commit], check=True)
    done = subprocess.run(
        ["sh", "-c", TREE.replace("/repo", str(into))], capture_output=True, text=True, check=True
    )
    return done.stdout


async def published_id(provider: ModalProvider, name: str) -> str:
    image = modal.Image.from_name(name)
    await image.build.aio(await provider.app())
    return str(image.object_id)


async def test_the_sdk_refuses_to_hydrate_images(env: ModalEnv) -> None:
    """Why the provider never calls `Image.hydrate` (the first plan's provider did, and failed on
    its first real call): the SDK raises for every image it has not built itself."""
    with pytest.raises(modal.exception.ExecutionError, match="cannot currently be hydrated"):
        await modal.Image.from_name(image_path(env.image)).hydrate.aio()


async def test_a_published_image_is_found_and_run_without_building(env: ModalEnv) -> None:
    """Regression: `build_image` of a commit whose image is published, then `create` from that
    name — both went through `Image.hydrate` and failed against the real SDK."""
    git(env.repo, "commit", "-q", "--allow-empty", "-m", f"published {uuid.uuid4().hex}")
    sha = await resolve_commit(env.repo, "HEAD")
    provider = env.provider()
    image = modal.Image.from_name(image_path(env.image))
    await image.build.aio(await provider.app())
    await image.publish.aio(modal_image_name(env.repo, sha))
    before = env.sandbox_ids()
    reference = await provider.build_image(env.repo, sha, "exit 1")  # would fail if it ran
    assert reference == modal_image_name(env.repo, sha) and provider.images.builds == 0
    assert env.sandbox_ids() == before  # no build sandbox either
    sandbox = await provider.create(env.spec(image=reference))
    try:
        assert await sandbox.read_file("/repo/built.txt") == b"built\n"
    finally:
        await sandbox.terminate()


async def test_an_unknown_image_is_one_sentence_naming_it(env: ModalEnv) -> None:
    missing = "evalbot-nothing-here:" + "0" * 40
    with pytest.raises(SandboxCreateError, match=f"image {missing} does not exist on Modal"):
        await env.provider().create(env.spec(image=missing))


async def test_build_sandboxes_reach_only_the_build_allowlist(env: ModalEnv) -> None:
    git(env.repo, "commit", "-q", "--allow-empty", "-m", f"fresh {uuid.uuid4().hex}")
    for domains, blocked in (((), True), (("pypi.org", "files.pythonhosted.org"), False)):
        git(env.repo, "commit", "-q", "--allow-empty", "-m", f"again {uuid.uuid4().hex}")
        before = env.sandbox_ids()
        await env.provider(build_allow_domains=domains).build_image(env.repo, "HEAD", "true")
        (build,) = build_sandboxes(env, before)
        assert build["block_network"] is blocked
        assert build["outbound_domain_allowlist"] == (list(domains) or None)
        assert build["terminated_at"] is not None


async def test_prewarm_then_reset_to_a_later_commit(env: ModalEnv, tmp_path: Path) -> None:
    history = make_history(tmp_path / "repo")
    provider = env.provider()
    warmed = await provider.prewarm(history.repo, history.base, SETUP)
    assert warmed.reference == prewarm_image_name(history.repo, history.base)
    assert not warmed.reused and warmed.commit == history.base
    before = env.sandbox_ids()
    again = await env.provider().prewarm(history.repo, history.base, SETUP)  # the next hour
    assert again.reused and env.sandbox_ids() == before

    reference = await env.provider().build_image(history.repo, history.ahead, SETUP)
    name, origin = split_reference(reference)
    assert name == modal_image_name(history.repo, history.ahead)
    assert origin is not None and (origin.kind, origin.base) == ("reset", history.base[:12])
    (build,) = build_sandboxes(env, before)  # one build sandbox, started from the prewarmed image
    assert build["image_id"] == await published_id(provider, warmed.reference)
    assert build["block_network"] is True

    sandbox = await provider.create(env.spec(image=reference))
    try:
        seen = await sandbox.exec(["sh", "-c", TREE])
        head = await sandbox.exec(["git", "-c", "safe.directory=/repo", "rev-parse", "HEAD"])
        built_by = await sandbox.read_file("/repo/.built-by")
    finally:
        await sandbox.terminate()
    outputs = ("./.built-by ", "./all.txt ", "./.stamp ")
    tree = "".join(line + "\n" for line in seen.stdout.decode().splitlines()
                   if not line.startswith(outputs))  # fmt: skip
    assert tree == local_tree(history.repo, history.ahead, tmp_path / "fresh")
    assert head.stdout.decode().strip() == history.ahead
    assert built_by == b"setup\nincremental\n"  # prewarmed by setup, then the incremental step


async def test_a_dependency_change_builds_in_full_and_discard_unpublishes(
    env: ModalEnv, tmp_path: Path
) -> None:
    history = make_history(tmp_path / "repo")
    provider = env.provider()
    warmed = await provider.prewarm(history.repo, history.base, SETUP)
    reference = await provider.build_image(history.repo, history.deps, SETUP)
    origin = split_reference(reference)[1]
    assert origin is not None and origin.kind == "full"
    assert origin.reason == "deps:requirements.txt"

    await provider.discard_prewarmed(history.repo, warmed.reference)
    assert not await provider.images.exists(warmed.reference)
    await provider.discard_prewarmed(history.repo, warmed.reference)  # gone already: no error
    sandbox = await env.provider().create(env.spec(image=reference))  # built images stay
    try:
        assert await sandbox.read_file("/repo/.built-by") == b"setup\n"
    finally:
        await sandbox.terminate()
    cold = await env.provider().build_image(history.repo, history.ahead, SETUP)
    origin = split_reference(cold)[1]
    assert origin is not None and origin.kind == "cold"  # no prewarmed ancestor any more
