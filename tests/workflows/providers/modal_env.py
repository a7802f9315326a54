"""What the `modal` provider tests share: the provider on the real `modal` SDK, talking to the
session's Modal test server (tests/fakes/modal_server), an agent repository, a world, and the
server's own view of the sandboxes (their meta.json, its counters)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import modal

from tests.fakes.modal_server.fixture import ModalTestServer
from tests.workflows.providers.kits import make_agent_repo, make_world
from workflows.providers.base import ResourceLimits, SandboxSpec
from workflows.providers.modal import ModalConfig, ModalProvider

FAST_RETRY = {"backoff_initial_s": 0.02, "backoff_max_s": 0.1}


class ModalEnv:
    def __init__(self, base: Path, server: ModalTestServer, app_name: str) -> None:
        self.base = base
        self.server = server
        self.app_name = app_name
        self.repo = make_agent_repo(base / "agent-repo")
        self.world = make_world(base / "world")
        self.image = ""

    def provider(self, **config: Any) -> ModalProvider:
        config.setdefault("spool_dir", self.base / "spool")
        config.setdefault("app_name", self.app_name)
        return ModalProvider(modal, ModalConfig(**config))

    def spec(self, run_id: str = "exp/case/arm/0", **changes: Any) -> SandboxSpec:
        spec = SandboxSpec(
            run_id=run_id,
            image=self.image,
            world_dir=self.world,
            case_files={"case.json": b'{"id": "case-1"}'},
            limits=ResourceLimits(cpu=0.5, memory_mb=512, wall_timeout_s=30),
            labels={"experiment": run_id.split("/")[0], "run": run_id},
        )
        return replace(spec, **changes)

    def meta(self, sandbox_id: str) -> dict[str, Any]:
        """What the server recorded of a sandbox's creation."""
        path = self.server.cloud.root / "sandboxes" / sandbox_id / "meta.json"
        return dict(json.loads(path.read_text()))

    def sandbox_ids(self) -> set[str]:
        return {p.name for p in (self.server.cloud.root / "sandboxes").glob("sb-*")}

    @contextlib.contextmanager
    def knobs(self, **knobs: Any) -> Iterator[None]:
        """The server's behaviour changed for a block, counters reset first, restored after."""
        saved = asdict(self.server.cloud.knobs())
        self.server.reset_counters()
        self.server.configure(**knobs)
        try:
            yield
        finally:
            self.server.configure(**saved)
