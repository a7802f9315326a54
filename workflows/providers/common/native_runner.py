"""The runner as a native program (`runner.c`), compiled once per worker, and the launcher the
runner spawner starts it (or, for `local`, bubblewrap) with (`launch.c`).

A `local` sandbox's runner is pid 1 of its namespace, started once per cell: as Python it paid an
interpreter's start and its own imports every time (about 10 ms of CPU of a cell's isolation;
benchmarks/isolation_cost.py); a `process` runner was a fork of the Python spawner that ran the
runner's Python code. `runner.c` does what `runner.py` does, with the same command line and state
file, so each provider runs whichever it has: this program when the host has a C compiler, else
the Python runner (for `local` compiled once, local/compiled_runner.py; for `process` forked by
the spawner), with a warning saying why.

Each program is named by the digest of its source and of the compiler's path, made under a
name of this process and renamed into place, and checked to run (it must print its usage) before
it is used: a compiler that makes something this host cannot execute leaves the Python way.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
from pathlib import Path

from workflows.process_owned import make_in_place

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("runner.c")
LAUNCH_SOURCE = Path(__file__).with_name("launch.c")  # the spawner's way to start bubblewrap
COMPILERS = ("cc", "gcc", "clang")
FLAGS = ("-O2", "-std=gnu11", "-Wall", "-Wextra")
COMPILE_TIMEOUT_S = 120
# programs this process built, by file name (stem and digest): a provider over another folder
# copies one instead of compiling it again (tests make hundreds of providers)
BUILT: dict[str, Path] = {}


def find_compiler() -> str | None:
    for name in COMPILERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def native_runner(folder: Path, source: Path = SOURCE, compiler: str | None = None) -> Path | None:
    """The runner program in `folder` (compiled if missing), or None when it cannot be made."""
    return native_program(folder, source, compiler, instead="sandboxes run the Python runner")


def native_launcher(folder: Path, compiler: str | None = None) -> Path | None:
    """The launcher (launch.c) in `folder` (compiled if missing), or None."""
    instead = "the spawner forks itself to start bubblewrap"
    return native_program(folder, LAUNCH_SOURCE, compiler, instead=instead)


def native_program(
    folder: Path, source: Path, compiler: str | None = None, *, instead: str
) -> Path | None:
    """`source` compiled into `folder`, named by its stem and a digest (compiled if missing), or
    None with a warning saying what happens `instead`."""
    compiler = compiler or find_compiler()
    if compiler is None:
        log.warning("evalbot: %s (no C compiler: cc, gcc or clang)", instead)
        return None
    digest = hashlib.sha256(source.read_bytes() + compiler.encode()).hexdigest()[:16]
    target = folder / f"{source.stem}-{digest}"
    if target.is_file():
        return target

    def build_into(partial: Path) -> None:
        made = BUILT.get(target.name)
        if made is not None and made.is_file():  # built for another folder by this process
            shutil.copyfile(made, partial)
        else:
            compile_program(compiler, source, partial)
        partial.chmod(0o755)
        require_usage(partial)

    try:
        make_in_place(target, build_into)
    except (OSError, subprocess.SubprocessError) as error:
        said = getattr(error, "stderr", None) or b""
        reason = f"{error} {said.decode(errors='replace')[-500:]}".strip()
        log.warning("evalbot: %s (%s failed: %s)", instead, source.name, reason)
        return None
    BUILT[target.name] = target
    return target


def compile_program(compiler: str, source: Path, output: Path) -> None:
    subprocess.run(
        [compiler, *FLAGS, "-o", str(output), str(source)],
        check=True,
        capture_output=True,
        timeout=COMPILE_TIMEOUT_S,
    )


def require_usage(program: Path) -> None:
    """Run with no arguments, each program refuses them with its usage line and exit status 1:
    a compiler that made something this host cannot run is caught here."""
    done = subprocess.run([str(program)], capture_output=True, timeout=30)
    if done.returncode != 1 or not done.stderr.startswith(b"usage: "):
        raise OSError(f"{program.name} did not run as built (exit {done.returncode})")
