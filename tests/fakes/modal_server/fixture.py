"""Starting the Modal test server for tests and benchmarks.

    with running_modal_server(tmp_path / "cloud", create_rate_per_s=5) as server:
        os.environ.update(server.env)     # the real `modal` SDK now talks to the server
        ...
        server.configure(start_latency_s=0.5)   # knobs change at runtime
        server.stats()   # {"created", "refused", "max_per_1s", "alive"}: what the SERVER saw

The server is a separate process (a client killed mid-run leaves containers the server still knows,
and several client processes share one cloud). Leaving the block stops it, which terminates every
sandbox still running.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.fakes.modal_server.auth import TOKEN_ID, TOKEN_SECRET
from tests.fakes.modal_server.server import describe
from tests.fakes.modal_server.state import ZERO_COUNTERS, Cloud, Knobs

REPO_ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 30.0


@dataclass
class ModalTestServer:
    ENV_KEYS = ("MODAL_SERVER_URL", "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_CONFIG_PATH")

    root: Path
    port: int
    http_port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What the SDK needs to talk to this server and nothing else (no ~/.modal.toml)."""
        return {
            "MODAL_SERVER_URL": self.url,
            "MODAL_TOKEN_ID": TOKEN_ID,
            "MODAL_TOKEN_SECRET": TOKEN_SECRET,
            "MODAL_CONFIG_PATH": str(self.root / "modal.toml"),
        }

    @property
    def cloud(self) -> Cloud:
        return Cloud(self.root)

    def configure(self, **knobs: Any) -> Knobs:
        """Change `start_latency_s`, `create_rate_per_s`, `max_starting` (None: no limit)."""
        unknown = set(knobs) - set(asdict(Knobs()))
        if unknown:
            raise TypeError(f"unknown knobs {sorted(unknown)}; known: {sorted(asdict(Knobs()))}")
        return self.cloud.configure(**knobs)

    def stats(self) -> dict[str, Any]:
        """Server-side counts: sandboxes `created`, creations `refused` (RESOURCE_EXHAUSTED sent),
        the most refusals one creation got across its attempts (`max_refused_one`, by its `run`
        tag or name), the most creations in any one-second window (`max_per_1s`), the most
        sandboxes starting at once (`peak_starting`), sandboxes whose container is running
        (`alive`), and `ready_delays` (seconds from each creation to its sandbox's first
        exec/snapshot call that got through)."""
        cloud = self.cloud
        return {**cloud.counters(), "alive": cloud.alive_sandboxes()}

    def rpc_counts(self) -> dict[str, int]:
        """Requests the server received, by method, as of the last second (the server writes
        them each second)."""
        path = self.root / "rpc_counts.json"
        return dict(json.loads(path.read_text())) if path.is_file() else {}

    def reset_counters(self) -> None:
        with self.cloud.control() as state:
            state["counters"] = dict(ZERO_COUNTERS)
            state["refused_by"] = {}
            state["creations"] = []
            state["ready_delays"] = []

    def stop(self) -> None:
        _stop(self.process)


@contextlib.contextmanager
def running_modal_server(root: Path, **knobs: Any) -> Iterator[ModalTestServer]:
    root = root.absolute()
    root.mkdir(parents=True, exist_ok=True)
    (root / "modal.toml").touch()
    ready = root / "ready.json"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "tests.fakes.modal_server", "--root", str(root)]
    argv += ["--port", "0", "--ready-file", str(ready)]
    for name, value in knobs.items():
        if name not in asdict(Knobs()):
            raise TypeError(f"unknown knob {name!r}")
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *sys.path])}
    with open(root / "server.log", "ab") as log:
        process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    try:
        ports = _wait_ready(ready, process, root / "server.log")
        server = ModalTestServer(root, ports["port"], ports["http_port"], process)
        yield server
    finally:
        _stop(process)
        left = container_processes(root)
        if left:  # the server's own stop kills them all (server.terminate_all): a bug to report
            warnings.warn(
                f"the Modal test server left {len(left)} container process(es) running; killed now",
                stacklevel=1,
            )
            kill_containers(left)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def container_processes(root: Path) -> list[int]:
    """The bubblewrap monitors of this cloud's containers still running: their command lines name
    `<root>/sandboxes/`."""
    marker = str(root.absolute() / "sandboxes").encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_containers(monitors: list[int]) -> None:
    """Each container's pid 1 (its monitor's child) first, so that the kernel kills the rest of
    its pid namespace; then the monitor."""
    for pid in monitors:
        with contextlib.suppress(OSError):
            for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
                os.kill(int(child), signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)


def _wait_ready(ready: Path, process: subprocess.Popen[bytes], log: Path) -> dict[str, int]:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready.exists():
            return describe(ready)
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the Modal test server exited at start:\n{tail}")
        time.sleep(0.02)
    raise RuntimeError(f"the Modal test server was not ready within {START_TIMEOUT_S:g} s")


def host_problem() -> str | None:
    """Why the server's containers cannot run here, or None."""
    if os.geteuid() != 0:
        return "the Modal test server's containers need root (bubblewrap with namespaces)"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed"
    if not Path("/usr/bin/python3").is_file():
        return "/usr/bin/python3 (the interpreter inside the test server's containers) is missing"
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "true"],
        capture_output=True,
        timeout=20,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot run here: {probe.stderr.decode(errors='replace').strip()}"
    return None
