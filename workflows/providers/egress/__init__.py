"""The way out of a sandbox: an egress proxy to allowlisted domains (docs/sandbox.md).

Its own family because two of its modules are scripts run by path: `egress_proxy.py` on the host
(and in-process around builds, `EgressProxy`) and `egress_forward.py` inside the sandbox; both
stdlib only. `sandbox_egress` is the host side the `local` provider calls (start and stop the
proxy, bind its socket, wrap the command); it uses the shared plumbing in
workflows/providers/common (bwrap's binds, launch, procs), never a provider.
"""

from workflows.providers.egress.egress_proxy import EgressProxy
from workflows.providers.egress.sandbox_egress import (
    PROXY_GRACE_S,
    RECORD_NAME,
    binds,
    launch_proxy,
    proxy_env,
    stop_proxy,
    wrap_command,
)

__all__ = [
    "PROXY_GRACE_S",
    "RECORD_NAME",
    "EgressProxy",
    "binds",
    "launch_proxy",
    "proxy_env",
    "stop_proxy",
    "wrap_command",
]
