"""Sandbox plumbing more than one provider family uses, so it belongs to none of them.

Who imports what decides what is here: the host folder of a sandbox (`sandbox_layout`, `folder`,
`sandbox_files`: `local` and `process`; the layout's env helpers: `modal` too; the layout: the warm
pool), host processes (`launch`, `procs`: `local`, `process`, `egress`), `settle` (`local`,
`process`), the bubblewrap command line (`bwrap`: `local` and `egress`), and the in-sandbox runner
(`runner.py`, stdlib only), which every provider runs by its path, `RUNNER`: `local` binds it into
its sandboxes, `modal` uploads it, `process` runs it through its spawner. Nothing here imports a
provider family; every module depends only on the contract (workflows/providers/base.py).
"""

from pathlib import Path

RUNNER = Path(__file__).with_name("runner.py")  # run as a script, never imported by the worker

__all__ = ["RUNNER"]
