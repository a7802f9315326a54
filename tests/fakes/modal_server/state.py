"""The Modal test server's "cloud": everything it holds, on disk under one root folder.

Several processes share one cloud (the server, and the fixture reading counters and writing knobs),
and a server restarted on the same root finds every object again:

    root/server.json             knobs: start_latency_s, create_rate_per_s, max_starting
    root/control.json            flock'd: creations in the last second, sandboxes still starting,
                                 counters (created, refused, max per 1 s window, peak starting),
                                 ready delays (creation to the first call that got through)
    root/sandboxes/<sb-id>/      meta.json, root/ (the container's /), ctl/ (agent socket, exec
                                 outputs, env.json), launch.log
    root/images/<im-id>/rootfs/  an image: what its containers find at / (plus the host's /usr)
    root/published/<name:tag>    the image id published under that tag
    root/volumes/<name>/         id, data/ (the Volume's files)
    root/blocks/<sha256>         uploaded Volume blocks
    root/secrets/<name>.json     a named Secret: id, env, created_at
    root/apps/<name>             an App id

Errors are raised as `grpclib.GRPCError` with the status real Modal answers; the servicers let them
through to the client.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets as random_tokens
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grpclib import GRPCError, Status

from workflows.providers.common.procs import is_alive

ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
TAG = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
SANDBOX_ID = re.compile(r"^sb-[A-Za-z0-9]{1,64}$")
IMAGE_ID = re.compile(r"^im-[A-Za-z0-9]{1,64}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
RATE_MESSAGE = "Sandbox creation rate limit exceeded"
ZERO_COUNTERS = {
    "created": 0, "refused": 0, "max_refused_one": 0, "max_per_1s": 0, "peak_starting": 0,
}  # fmt: skip


def new_id(prefix: str, length: int = 22) -> str:
    return prefix + "".join(random_tokens.choice(ALPHABET) for _ in range(length))


def write_json(path: Path, data: Any, mode: int = 0o600) -> None:
    """Atomically (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.{random_tokens.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
    tmp.replace(path)


def read_json(path: Path) -> Any:
    return json.loads(path.read_bytes())


@dataclass
class Knobs:
    """The server's behaviour, changeable at runtime (the server re-reads server.json)."""

    start_latency_s: float = 0.0
    create_rate_per_s: float | None = None
    max_starting: int | None = None
    # seconds between a container's start and the record of its pid: a slow start, so that a test
    # can stop the server while a creation is under way
    launch_delay_s: float = 0.0
    # injected failures: "RpcName" or "RpcName:object name" -> "[STATUS:]message", answered
    # with that gRPC status (default PERMISSION_DENIED: the SDK's PermissionDeniedError, never
    # retried); the object name is the request's deployment_name, app_name, tag or sandbox_id
    faults: dict[str, str] = field(default_factory=dict)


class Cloud:
    def __init__(self, root: Path) -> None:
        self.root = root.absolute()
        for folder in (
            "sandboxes", "images", "published", "volumes", "blocks", "secrets", "apps",
        ):  # fmt: skip
            (self.root / folder).mkdir(parents=True, exist_ok=True)

    # -- knobs and admission ------------------------------------------------------------------

    def knobs(self) -> Knobs:
        try:
            return Knobs(**read_json(self.root / "server.json"))
        except FileNotFoundError:
            return Knobs()

    def configure(self, **changes: Any) -> Knobs:
        with self.control():  # serialises writers
            knobs = Knobs(**{**asdict(self.knobs()), **changes})
            write_json(self.root / "server.json", asdict(knobs))
        return knobs

    @contextlib.contextmanager
    def control(self) -> Iterator[dict[str, Any]]:
        path = self.root / "control.json"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.read(fd, 1 << 24)
            state = json.loads(raw) if raw else {}
            state.setdefault("creations", [])
            state.setdefault("starting", {})
            state.setdefault("counters", dict(ZERO_COUNTERS))
            yield state
            data = json.dumps(state).encode()
            os.lseek(fd, 0, os.SEEK_SET)
            os.truncate(fd, 0)
            os.write(fd, data)
        finally:
            os.close(fd)

    def admit(self, sandbox_id: str, knobs: Knobs, key: str | None = None) -> tuple[float, float]:
        """Apply the rate limit and the starting quota to one creation: (created_at, ready_at).
        `key` names what is being created across its attempts (its `run` tag or name): the
        refusals each key got are counted (`refused_by`, whose largest count is in the counters
        as `max_refused_one`)."""
        with self.control() as state:
            now = time.time()
            state["creations"] = [t for t in state["creations"] if now - t < 1.0]
            state["starting"] = {k: t for k, t in state["starting"].items() if t > now}
            counters = state["counters"]
            rate, cap = knobs.create_rate_per_s, knobs.max_starting
            refusal = None
            if rate is not None and len(state["creations"]) >= rate:
                refusal = f"{RATE_MESSAGE} ({rate:g}/s). Please retry with backoff."
            elif cap is not None and len(state["starting"]) >= cap:
                refusal = f"Too many Sandboxes are starting at once ({cap}). Please retry later."
            if refusal is not None:
                counters["refused"] += 1
                if key is not None:
                    by_key = state.setdefault("refused_by", {})
                    by_key[key] = by_key.get(key, 0) + 1
                    counters["max_refused_one"] = max(
                        counters.get("max_refused_one", 0), by_key[key]
                    )
            else:
                ready_at = now + knobs.start_latency_s
                state["creations"].append(now)
                state["starting"][sandbox_id] = ready_at
                counters["created"] += 1
                counters["max_per_1s"] = max(counters["max_per_1s"], len(state["creations"]))
                counters["peak_starting"] = max(counters["peak_starting"], len(state["starting"]))
        if refusal is not None:  # raised once the counters are saved
            raise GRPCError(Status.RESOURCE_EXHAUSTED, refusal)
        return now, ready_at

    def started_or_gone(self, sandbox_id: str) -> None:
        with self.control() as state:
            state["starting"].pop(sandbox_id, None)

    def record_ready(self, delay_s: float) -> None:
        """A sandbox's first call got through: how long after its creation."""
        with self.control() as state:
            state.setdefault("ready_delays", []).append(round(delay_s, 4))

    def counters(self) -> dict[str, Any]:
        with self.control() as state:
            return {**state["counters"], "ready_delays": list(state.get("ready_delays", []))}

    # -- apps ---------------------------------------------------------------------------------

    def app_id(self, name: str, create: bool) -> str:
        check_name(name, "App")
        path = self.root / "apps" / name
        if not path.exists():
            if not create:
                raise GRPCError(Status.NOT_FOUND, f"App '{name}' not found")
            with contextlib.suppress(FileExistsError), open(path, "x") as handle:
                handle.write(new_id("ap-"))
        return path.read_text()

    def app_exists(self, app_id: str) -> bool:
        return any(p.read_text() == app_id for p in (self.root / "apps").iterdir())

    # -- secrets ------------------------------------------------------------------------------

    def secret_path(self, name: str) -> Path:
        check_name(name, "Secret")
        return self.root / "secrets" / f"{name}.json"

    def secret(self, name: str) -> dict[str, Any]:
        try:
            return dict(read_json(self.secret_path(name)))
        except FileNotFoundError:
            raise GRPCError(
                Status.NOT_FOUND, f"Secret '{name}' not found in environment 'main'"
            ) from None

    def put_secret(self, name: str, env: dict[str, str], *, replace: bool) -> dict[str, Any]:
        path = self.secret_path(name)
        with self.control():  # serialises writers of secrets
            if path.exists() and not replace:
                raise GRPCError(Status.ALREADY_EXISTS, f"Secret '{name}' already exists")
            old = read_json(path) if path.exists() else None
            record = {
                "id": old["id"] if old else new_id("st-"),
                "name": name,
                "env": dict(env),
                "created_at": old["created_at"] if old else time.time(),
            }
            write_json(path, record)
        return record

    def secrets(self) -> list[dict[str, Any]]:
        return [read_json(p) for p in (self.root / "secrets").glob("*.json")]

    def secret_by_id(self, secret_id: str) -> dict[str, Any]:
        for record in self.secrets():
            if record["id"] == secret_id:
                return record
        raise GRPCError(Status.NOT_FOUND, f"Secret {secret_id} not found")

    # -- images -------------------------------------------------------------------------------

    def image_dir(self, image_id: str) -> Path:
        if not IMAGE_ID.fullmatch(image_id or ""):
            raise GRPCError(Status.INVALID_ARGUMENT, f"Invalid Image id: {image_id!r}")
        folder = self.root / "images" / image_id
        if not (folder / "rootfs").is_dir():
            raise GRPCError(Status.NOT_FOUND, f"Image {image_id} not found")
        return folder

    def ensure_image(self, image_id: str) -> Path:
        """An image built from nothing: an empty root (its containers get the host's /usr)."""
        folder = self.root / "images" / image_id
        (folder / "rootfs").mkdir(parents=True, exist_ok=True)
        return folder

    def published_path(self, tag: str) -> Path:
        name_tag = tag.rpartition("/")[2]  # one environment: drop an "env/" prefix
        name, _, version = name_tag.partition(":")
        check_name(name, "Image")
        if not TAG.fullmatch(version or "latest"):
            raise GRPCError(Status.INVALID_ARGUMENT, f"Invalid Image tag: '{version}'")
        return self.root / "published" / f"{name}:{version or 'latest'}"

    def publish(self, tag: str, image_id: str) -> None:
        self.image_dir(image_id)
        target = self.published_path(tag)
        tmp = target.with_name(f".{target.name}.{random_tokens.token_hex(4)}")
        tmp.write_text(image_id)
        tmp.replace(target)

    def unpublish(self, tag: str) -> None:
        """The name goes; the image stays (as on Modal: `modal image names delete`)."""
        try:
            self.published_path(tag).unlink()
        except FileNotFoundError:
            raise GRPCError(Status.NOT_FOUND, f"Image '{tag}' not found") from None

    def image_by_tag(self, tag: str) -> str:
        try:
            return self.published_path(tag).read_text()
        except FileNotFoundError:
            raise GRPCError(Status.NOT_FOUND, f"Image '{tag}' not found") from None

    # -- volumes ------------------------------------------------------------------------------

    def volume(self, name: str, create: bool) -> str:
        check_name(name, "Volume")
        folder = self.root / "volumes" / name
        if create:
            (folder / "data").mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError), open(folder / "id", "x") as handle:
                handle.write(new_id("vo-"))
        if not (folder / "id").is_file():
            raise GRPCError(Status.NOT_FOUND, f"Volume '{name}' not found in environment 'main'")
        return (folder / "id").read_text()

    def volume_data(self, volume_id: str) -> tuple[str, Path]:
        for folder in (self.root / "volumes").iterdir():
            with contextlib.suppress(FileNotFoundError):
                if (folder / "id").read_text() == volume_id:
                    return folder.name, folder / "data"
        raise GRPCError(Status.NOT_FOUND, f"Volume {volume_id} not found")

    def block_path(self, sha256_hex: str) -> Path:
        if not SHA256.fullmatch(sha256_hex):
            raise GRPCError(Status.INVALID_ARGUMENT, f"Invalid block hash {sha256_hex!r}")
        return self.root / "blocks" / sha256_hex

    # -- sandboxes ----------------------------------------------------------------------------

    def sandbox_dir(self, sandbox_id: str) -> Path:
        if not SANDBOX_ID.fullmatch(sandbox_id or ""):
            raise GRPCError(Status.INVALID_ARGUMENT, f"Invalid Sandbox id: {sandbox_id!r}")
        return self.root / "sandboxes" / sandbox_id

    def sandbox_meta(self, sandbox_id: str) -> dict[str, Any]:
        try:
            return dict(read_json(self.sandbox_dir(sandbox_id) / "meta.json"))
        except FileNotFoundError:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {sandbox_id} not found") from None

    def sandbox_metas(self) -> list[dict[str, Any]]:
        found = []
        for folder in (self.root / "sandboxes").iterdir():
            with contextlib.suppress(FileNotFoundError, ValueError):
                found.append(dict(read_json(folder / "meta.json")))
        return found

    def alive_sandboxes(self) -> int:
        return sum(1 for meta in self.sandbox_metas() if container_running(meta))


def container_running(meta: Mapping[str, Any]) -> bool:
    monitor = meta.get("monitor")
    if meta.get("terminated_at") is not None or not monitor:
        return False
    return is_alive(monitor["pid"], monitor["start_time"])


def check_name(name: str, kind: str) -> None:
    if not NAME.fullmatch(name or "") or name.startswith(("ap-", "vo-", "st-", "im-")):
        raise GRPCError(
            Status.INVALID_ARGUMENT,
            f"Invalid {kind} name: '{name}'. Names may contain only alphanumeric characters, "
            "dashes, periods, and underscores, and must be shorter than 64 characters.",
        )
