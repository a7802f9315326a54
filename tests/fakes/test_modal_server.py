"""The Modal test server behind the REAL `modal` SDK (no patching): what our code path calls works
the way Modal does, and fails where Modal fails.

One server for the session (`modal_server`); each test uses its own names. Sandboxes are real
bubblewrap containers, so each test creates as few as it can.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import modal
import modal.exception as errors
import pytest
from modal.stream_type import StreamType

from tests.fakes.modal_server.auth import BAD_TOKEN_MESSAGE, TOKEN_ID, TOKEN_SECRET
from tests.fakes.modal_server.fixture import (
    ModalTestServer,
    container_processes,
    kill_containers,
    running_modal_server,
)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def app(modal_server: ModalTestServer) -> modal.App:
    return modal.App.lookup(unique("wire"), create_if_missing=True)


@pytest.fixture(scope="module")
def sandbox(app: modal.App) -> Iterator[modal.Sandbox]:
    """One plain sandbox for the tests that only exec and touch files."""
    handle = modal.Sandbox.create(app=app, image=modal.Image.debian_slim(), timeout=300)
    yield handle
    handle.terminate()


def run(handle: modal.Sandbox, *argv: str, **options: object) -> tuple[str, str, int]:
    process = handle.exec(*argv, **options)  # type: ignore[arg-type]
    return process.stdout.read(), process.stderr.read(), process.wait()


# -- apps, secrets, volumes, sandboxes ----------------------------------------------------------


def test_app_lookup_creates_once_and_unknown_apps_are_not_found(modal_server: ModalTestServer):
    name = unique("app")
    first = modal.App.lookup(name, create_if_missing=True)
    again = modal.App.lookup(name)
    assert first.app_id == again.app_id and first.app_id.startswith("ap-")
    with pytest.raises(errors.NotFoundError):
        modal.App.lookup(unique("missing"))


def test_a_sandbox_gets_env_secret_read_only_volume_workdir_and_tags(
    app: modal.App, modal_server: ModalTestServer, tmp_path: Path
):
    group, volume_name = unique("group"), unique("vol")
    modal.Secret.objects.create(group, {"FROM_SECRET": "s3cret"})
    volume = modal.Volume.from_name(volume_name, create_if_missing=True)
    (tmp_path / "data.txt").write_text("volume data\n")
    with volume.batch_upload(force=True) as batch:
        batch.put_file(tmp_path / "data.txt", "/inputs/data.txt")
    assert [e.path for e in volume.listdir("/inputs")] == ["inputs/data.txt"]
    tags = {"run": unique("run")}
    handle = modal.Sandbox.create(
        app=app,
        image=modal.Image.debian_slim(),
        env={"FROM_ENV": "e1"},
        secrets=[modal.Secret.from_name(group)],
        volumes={"/mnt/vol": volume.read_only()},
        workdir="/tmp",
        tags=tags,
        timeout=120,
        cpu=(0.5, 1.0),
        memory=(256, 512),
        block_network=True,
    )
    meta = modal_server.cloud.sandbox_meta(handle.object_id)
    assert meta["cpu"] == [0.5, 1.0] and meta["memory"] == [256, 512]
    assert meta["block_network"] is True and meta["secrets"] == [group]
    assert meta["mounts"]["/mnt/vol"]["read_only"] is True
    try:
        script = 'echo "$FROM_ENV $FROM_SECRET $(pwd)"; cat /mnt/vol/inputs/data.txt'
        assert run(handle, "sh", "-c", script) == ("e1 s3cret /tmp\nvolume data\n", "", 0)
        _, stderr, code = run(handle, "sh", "-c", "echo x > /mnt/vol/new.txt")
        assert code != 0 and "Read-only file system" in stderr
        assert handle.get_tags() == tags
        assert handle.poll() is None
    finally:
        handle.terminate()


def test_secrets_are_replaced_whole_and_listed(app: modal.App):
    """The calls infra/secrets/modal_sink.py makes: replace a Secret's contents exactly."""
    name = unique("sink")
    modal.Secret._create_deployed(name, {"A": "1", "DROPPED": "x"}, overwrite=True)
    modal.Secret._create_deployed(name, {"A": "2"}, overwrite=True)
    with pytest.raises(errors.AlreadyExistsError):
        modal.Secret._create_deployed(name, {"A": "3"})
    assert name in [secret.name for secret in modal.Secret.objects.list()]
    handle = modal.Sandbox.create(app=app, secrets=[modal.Secret.from_name(name)], timeout=60)
    try:
        assert run(handle, "sh", "-c", 'echo "$A-${DROPPED:-gone}"')[0] == "2-gone\n"
    finally:
        handle.terminate()


def test_invalid_arguments_are_refused_by_the_server(app: modal.App):
    with pytest.raises(errors.InvalidError, match="timeout"):
        modal.Sandbox.create(app=app, timeout=10 * 24 * 3600)
    with pytest.raises(errors.InvalidError, match="Invalid Sandbox id"):
        modal.Sandbox.from_id("sb-not/an/id")


def test_an_unknown_secret_or_volume_fails_the_creation(app: modal.App):
    with pytest.raises(errors.NotFoundError, match="Secret"):
        modal.Sandbox.create(app=app, secrets=[modal.Secret.from_name(unique("nosecret"))])
    with pytest.raises(errors.NotFoundError, match="Volume"):
        modal.Sandbox.create(app=app, volumes={"/v": modal.Volume.from_name(unique("novol"))})


def test_sandbox_list_filters_by_tags_and_from_id_works_on_a_new_client(app: modal.App):
    tag = unique("reap")
    mine = modal.Sandbox.create(app=app, tags={"owner": tag}, timeout=120)
    other = modal.Sandbox.create(app=app, tags={"owner": unique("other")}, timeout=120)
    try:
        listed = modal.Sandbox.list(app_id=app.app_id, tags={"owner": tag})
        assert [s.object_id for s in listed] == [mine.object_id]
        client = modal.Client.from_credentials(TOKEN_ID, TOKEN_SECRET)
        again = modal.Sandbox.from_id(mine.object_id, client=client)
        assert run(again, "echo", "reattached") == ("reattached\n", "", 0)
        with pytest.raises(errors.NotFoundError):
            modal.Sandbox.from_id("sb-" + "x" * 24, client=client)
    finally:
        mine.terminate()
        other.terminate()


# -- exec -----------------------------------------------------------------------------------------


def test_exec_streams_stdout_and_stderr_and_returns_the_exit_code(sandbox: modal.Sandbox):
    process = sandbox.exec("sh", "-c", "echo one; echo two >&2; echo three; exit 7", text=False)
    assert process.stdout.read() == b"one\nthree\n"
    assert process.stderr.read() == b"two\n"
    assert process.wait() == 7
    quiet = sandbox.exec("sh", "-c", "echo hidden; exit 0", stdout=StreamType.DEVNULL)
    assert quiet.wait() == 0
    with pytest.raises(ValueError, match="DEVNULL"):
        quiet.stdout.read()


def test_exec_env_and_workdir(sandbox: modal.Sandbox):
    stdout, _, code = run(sandbox, "sh", "-c", "echo $X; pwd", env={"X": "y"}, workdir="/root")
    assert (stdout, code) == ("y\n/root\n", 0)


def test_an_exec_past_its_timeout_is_killed_and_reports_minus_one(sandbox: modal.Sandbox):
    started = time.monotonic()
    process = sandbox.exec("sh", "-c", "sleep 2; touch /tmp/survived", timeout=1)
    assert process.wait() == -1
    assert time.monotonic() - started < 10
    time.sleep(2)
    with pytest.raises(errors.SandboxFilesystemNotFoundError):
        sandbox.filesystem.stat("/tmp/survived")


# -- filesystem -----------------------------------------------------------------------------------


def test_filesystem_calls_round_trip(sandbox: modal.Sandbox, tmp_path: Path):
    fs = sandbox.filesystem
    payload = os.urandom(3 << 20)  # several stdin chunks
    fs.write_bytes(payload, "/work/deep/blob.bin")
    assert fs.read_bytes("/work/deep/blob.bin") == payload
    (tmp_path / "local.txt").write_text("from local")
    fs.copy_from_local(tmp_path / "local.txt", "/work/local.txt")
    fs.copy_to_local("/work/local.txt", tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_text() == "from local"
    assert sorted(f.name for f in fs.list_files("/work")) == ["deep", "local.txt"]
    info = fs.stat("/work/local.txt")
    assert (info.size, info.is_file()) == (10, True)
    fs.make_directory("/work/a/b")
    assert fs.stat("/work/a/b").is_dir()
    with pytest.raises(errors.SandboxFilesystemDirectoryNotEmptyError):
        fs.remove("/work/a")
    fs.remove("/work/a", recursive=True)
    fs.remove("/work/local.txt")
    assert sorted(f.name for f in fs.list_files("/work")) == ["deep"]


def test_filesystem_errors_are_the_sdks(sandbox: modal.Sandbox):
    fs = sandbox.filesystem
    fs.write_bytes(b"x", "/errs/file")
    with pytest.raises(errors.SandboxFilesystemNotFoundError):
        fs.read_bytes("/errs/missing")
    with pytest.raises(errors.SandboxFilesystemNotFoundError):
        fs.stat("/errs/missing")
    with pytest.raises(errors.SandboxFilesystemNotADirectoryError):
        fs.list_files("/errs/file")
    with pytest.raises(errors.SandboxFilesystemIsADirectoryError):
        fs.read_bytes("/errs")
    with pytest.raises(errors.SandboxFilesystemNotADirectoryError):
        fs.write_bytes(b"y", "/errs/file/below")
    with pytest.raises(errors.InvalidError):
        fs.read_bytes("relative/path")


# -- images ---------------------------------------------------------------------------------------


def test_snapshot_publish_and_create_from_the_name(app: modal.App, sandbox: modal.Sandbox):
    sandbox.filesystem.write_bytes(b"baked in", "/opt/state/marker")
    image = sandbox.snapshot_filesystem(timeout=30)
    name = unique("snap")
    image.publish(name)
    handle = modal.Sandbox.create(app=app, image=modal.Image.from_name(name), timeout=60)
    try:
        assert handle.filesystem.read_bytes("/opt/state/marker") == b"baked in"
    finally:
        handle.terminate()
    assert modal.Image.from_name(name).build(app).object_id == image.object_id
    assert modal.Image.from_id(image.object_id).object_id == image.object_id


def test_unknown_image_names_fail_at_creation_and_images_cannot_hydrate(app: modal.App):
    with pytest.raises(errors.NotFoundError):
        modal.Sandbox.create(app=app, image=modal.Image.from_name(unique("noimage")), timeout=60)
    with pytest.raises(errors.NotFoundError):
        modal.Sandbox.create(app=app, image=modal.Image.from_id("im-" + "0" * 22), timeout=60)
    with pytest.raises(errors.ExecutionError, match="cannot currently be hydrated"):
        modal.Image.from_name(unique("lazy")).hydrate()


# -- lifecycle, limits, auth ----------------------------------------------------------------------


def test_terminate_ends_exec_and_filesystem(app: modal.App, modal_server: ModalTestServer):
    handle = modal.Sandbox.create(app=app, timeout=60)
    assert run(handle, "true")[2] == 0
    alive = modal_server.stats()["alive"]
    handle.terminate()
    assert handle.poll() == 137
    assert modal_server.stats()["alive"] == alive - 1
    with pytest.raises(errors.NotFoundError):
        handle.exec("true").wait()
    with pytest.raises(errors.NotFoundError, match="unavailable"):
        handle.filesystem.read_bytes("/etc/hostname")
    stale = modal.Sandbox.from_id(handle.object_id)
    assert stale.poll() == 137


def test_a_sandbox_past_its_timeout_ends_as_timed_out(app: modal.App):
    handle = modal.Sandbox.create(app=app, timeout=1)
    with pytest.raises(errors.SandboxTimeoutError):
        handle.wait()
    assert handle.poll() == 124


def test_a_killed_client_leaves_a_sandbox_the_server_still_knows(
    app: modal.App, modal_server: ModalTestServer
):
    """A worker dies mid-run: its sandbox lives on, and another process finds it by tag."""
    tag = unique("orphan")
    script = (
        "import modal, sys, time\n"
        f"app = modal.App.lookup({app.name!r})\n"
        f"modal.Sandbox.create(app=app, tags={{'owner': {tag!r}}}, timeout=120)\n"
        "print('created', flush=True)\n"
        "time.sleep(60)\n"
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        env={**os.environ, **modal_server.env},
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline() == b"created\n"
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    [orphan] = modal.Sandbox.list(app_id=app.app_id, tags={"owner": tag})
    assert run(orphan, "echo", "still here") == ("still here\n", "", 0)
    orphan.terminate()
    assert list(modal.Sandbox.list(app_id=app.app_id, tags={"owner": tag})) == []


def test_start_latency_makes_exec_wait(app: modal.App, modal_server: ModalTestServer):
    modal_server.configure(start_latency_s=1.0)
    modal_server.reset_counters()
    try:
        started = time.monotonic()
        handle = modal.Sandbox.create(app=app, timeout=60)
        created = time.monotonic() - started
        assert run(handle, "true")[2] == 0
        assert created < 0.9 <= time.monotonic() - started
        handle.terminate()
    finally:
        modal_server.configure(start_latency_s=0.0)
    [delay] = modal_server.stats()["ready_delays"]
    assert 1.0 <= delay < 5


def test_creation_rate_limit_is_the_servers(app: modal.App, modal_server: ModalTestServer):
    modal_server.configure(create_rate_per_s=2)
    modal_server.reset_counters()
    results: list[object] = []

    def create() -> None:
        try:
            results.append(modal.Sandbox.create(app=app, timeout=60))
        except errors.ResourceExhaustedError as error:
            results.append(error)

    try:
        threads = [threading.Thread(target=create) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        modal_server.configure(create_rate_per_s=None)
    created = [r for r in results if isinstance(r, modal.Sandbox)]
    refused = [r for r in results if isinstance(r, errors.ResourceExhaustedError)]
    for handle in created:
        handle.terminate()
    stats = modal_server.stats()
    assert refused and "rate limit" in str(refused[0])
    assert (stats["created"], stats["refused"]) == (len(created), len(refused))
    assert stats["max_per_1s"] <= 2 and stats["peak_starting"] <= 2


def test_max_starting_refuses_while_sandboxes_start(app: modal.App, modal_server: ModalTestServer):
    modal_server.configure(max_starting=1, start_latency_s=2.0)
    try:
        first = modal.Sandbox.create(app=app, timeout=60)
        with pytest.raises(errors.ResourceExhaustedError, match="starting"):
            modal.Sandbox.create(app=app, timeout=60)
        first.terminate()
    finally:
        modal_server.configure(max_starting=None, start_latency_s=0.0)


def test_a_wrong_token_is_rejected(modal_server: ModalTestServer):
    client = modal.Client.from_credentials("ak-wrong", "as-wrong")
    with pytest.raises(errors.AuthError, match="token"):
        modal.App.lookup(unique("auth"), create_if_missing=True, client=client)
    assert "modal token new" in BAD_TOKEN_MESSAGE


def test_rpcs_outside_our_code_path_answer_unimplemented(modal_server: ModalTestServer):
    with pytest.raises(errors.UnimplementedError, match="DictGetOrCreate"):
        modal.Dict.from_name(unique("dict"), create_if_missing=True).hydrate()


def test_concurrent_stats_never_see_an_empty_stdout(sandbox: modal.Sandbox):
    """Many `filesystem.stat` calls at once through the real SDK, each an exec of the filesystem
    tool whose output must be complete when its exit status is: under load an empty stdout with
    exit code 0 made the SDK fail on `json.loads('')`."""
    fs = sandbox.filesystem
    fs.write_bytes(b"12345", "/stress/file")
    with ThreadPoolExecutor(max_workers=30) as pool:
        infos = list(pool.map(lambda _: fs.stat("/stress/file"), range(90)))
        outputs = list(pool.map(lambda n: run(sandbox, "echo", f"line {n}"), range(30)))
    assert {(info.size, info.is_file()) for info in infos} == {(5, True)}
    assert outputs == [(f"line {n}\n", "", 0) for n in range(30)]


def test_a_creation_abandoned_mid_launch_completes_and_the_stop_kills_it(tmp_path: Path):
    """The client goes away while its sandbox is starting (after the container started, before its
    pid was recorded): as on Modal, the sandbox is still made and recorded, running; stopping the
    server then kills it.

    Broken build caught: a cancelled creation that only marks its sandbox terminated, leaving the
    bubblewrap container running unrecorded (checked: the first assertion fails on it)."""
    root = tmp_path / "cloud"
    with running_modal_server(root) as server:
        server.configure(launch_delay_s=2.0)
        client = creating_client(server, tmp_path / "first.log")
        try:
            deadline = time.monotonic() + 30
            while not container_processes(root) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert container_processes(root), "the container never started"
        finally:
            client.kill()
            client.wait()
        time.sleep(2.5)  # past the launch delay
        [meta] = server.cloud.sandbox_metas()
        assert meta["monitor"] is not None and meta["finish"] is None
        server.configure(launch_delay_s=3.0)
        second = creating_client(server, tmp_path / "second.log")
        try:
            deadline = time.monotonic() + 30
            while len(container_processes(root)) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)  # until its container is up (its pid is recorded 3 s later)
            assert len(container_processes(root)) >= 2, (
                f"the second container never started; its client's exit: {second.poll()}, "
                f"its output: {(tmp_path / 'second.log').read_text()[-2000:]!r}; the server's "
                f"sandboxes: {server.cloud.sandbox_metas()}"
            )
            server.stop()
            left = container_processes(root)
        finally:
            second.kill()
            second.wait()
    try:
        assert server.process.returncode == 0  # stopped by SIGTERM within the wait, not killed
        assert left == []
    finally:
        kill_containers(left)


def creating_client(server: ModalTestServer, log: Path) -> subprocess.Popen[bytes]:
    """Another process whose real SDK creates one sandbox on `server`, its output in `log`."""
    script = (
        "import modal\n"
        "app = modal.App.lookup('abandoned', create_if_missing=True)\n"
        "modal.Sandbox.create(app=app, timeout=120)\n"
    )
    with log.open("wb") as output:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-c", script],
            env={**os.environ, **server.env},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
