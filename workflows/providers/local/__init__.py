"""The `local` provider: bubblewrap sandboxes on this machine (docs/sandbox.md).

What only it uses lives here: the provider (`local_provider`), cgroups, the loop-mounted disk, the
seccomp filter and the uid slots. It builds on the shared plumbing (workflows/providers/common),
the egress proxy (workflows/providers/egress) and the images and warm pool of workflows/prewarm,
and depends on the contract in workflows/providers/base.py; nothing outside imports its insides
but tests.
"""

from workflows.providers.local.local_provider import LocalProvider, LocalSandbox, host_problem

__all__ = ["LocalProvider", "LocalSandbox", "host_problem"]
