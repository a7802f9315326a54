"""The `local` provider: bubblewrap sandboxes on this machine (docs/sandbox.md).

What only it uses lives here: the provider (`local_provider`), cgroups, the loop-mounted disk, the
seccomp filter and the uid slots. It builds on the shared plumbing (workflows/providers/common),
the egress proxy (workflows/providers/egress) and the images and warm pool of workflows/prewarm,
and depends on the contract in workflows/providers/base.py; nothing outside imports its insides
but tests (`evalbot doctor` uses what this module exports).
"""

from workflows.providers.local.cgroup_backend import CgroupStatus, cgroup_status
from workflows.providers.local.local_provider import (
    HOST_TOOLS,
    SANDBOX_PYTHON,
    LocalProvider,
    LocalSandbox,
    host_problem,
)
from workflows.providers.local.seccomp import program as seccomp_program

__all__ = [
    "HOST_TOOLS",
    "SANDBOX_PYTHON",
    "CgroupStatus",
    "LocalProvider",
    "LocalSandbox",
    "cgroup_status",
    "host_problem",
    "seccomp_program",
]
