"""The local provider, except that the sandboxes of chosen runs die under the engine — an
infrastructure failure the agent did not cause (a host that lost the sandbox, an evicted VM).

The first `attach` after such a sandbox is created (the engine's `execute` stage) terminates it
for real and reports it gone, so the engine sees what it would see if the host had killed it:
the runner lost, a fresh sandbox, and the same again until it gives up (`sandbox_error`).
"""

from __future__ import annotations

from collections.abc import Callable

from workflows.providers.base import SandboxNotFound, SandboxSpec
from workflows.providers.local import LocalProvider, LocalSandbox
from workflows.settings import Settings

NAME = "dying-local"


class DyingSandboxes(LocalProvider):
    name = "local"  # the sandboxes are local ones: attach and reaping must recognise them

    def __init__(self, settings: Settings, doomed: Callable[[str], bool]) -> None:
        super().__init__(
            settings.sandbox_dir,
            settings.image_dir,
            cgroup_root=settings.sandbox.cgroup_root,
            cgroups=settings.sandbox.cgroups,
        )
        self.doomed = doomed
        self.killed: list[str] = []  # run ids whose sandbox died, once per sandbox
        self._doomed_sandboxes: dict[str, str] = {}

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        sandbox = await super().create(spec)
        if self.doomed(spec.run_id):
            self._doomed_sandboxes[sandbox.id] = spec.run_id
        return sandbox

    async def attach(self, sandbox_id: str) -> LocalSandbox:
        run_id = self._doomed_sandboxes.pop(sandbox_id, None)
        if run_id is None:
            return await super().attach(sandbox_id)
        await (await super().attach(sandbox_id)).terminate()
        self.killed.append(run_id)
        raise SandboxNotFound(f"sandbox {sandbox_id} died: the host lost it")
