"""The runner as a native program (`runner.c`), compiled once per worker, and the launcher the
runner spawner starts it (or, for `local`, bubblewrap) with (`launch.c`).

A `local` sandbox's runner is pid 1 of its namespace, started once per cell: as Python it paid an
interpreter's start and its own imports every time (about 10 ms of CPU of a cell's isolation;
benchmarks/isolation_cost.py); a `process` runner was a fork of the Python spawner that ran the
runner's Python code. `runner.c` does what `runner.py` does, with the same command line and state
file, so each provider runs whichever it has: this program when the host has a C compiler, else
the Python runner (for `local` compiled once, local/compiled_runner.py; for `process` forked by
the spawner), with a warning saying why.

Each program is named by the digest of its source, the compiler's path and its flags, made under
a name of this process and renamed into place, and checked to run (it must print its usage)
before it is used: a compiler that makes something this host cannot execute leaves the Python way.

Where `musl-gcc` is installed (Debian's musl-tools), both programs are linked statically against
musl first. A program linked against glibc spends most of its start-up in glibc's detection of
the CPU (dozens of `cpuid` instructions, each a trap to the hypervisor in a virtual machine); a
runner's whole life with a `true` agent costs 0.80× the CPU built this way (benchmarks/RESULTS.md,
"program-start"; docs/sandbox.md, "Start-up cost"). The runner and the launcher start once per
`local` cell each. If musl cannot build one, the system compiler does, as before.

A shared library (`native_library`, e.g. local/disk_ops.c) is built by the system compiler alone
(Python loads it; a static musl object cannot be) and checked by loading it in a separate
interpreter and calling its `evalbot_library_check`.
"""

from __future__ import annotations

import hashlib
import logging
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workflows.process_owned import make_in_place

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("runner.c")
LAUNCH_SOURCE = Path(__file__).with_name("launch.c")  # the spawner's way to start bubblewrap
COMPILERS = ("cc", "gcc", "clang")
MUSL = "musl-gcc"
FLAGS = ("-O2", "-std=gnu11", "-Wall", "-Wextra")
LIBRARY_FLAGS = (*FLAGS, "-shared", "-fPIC")
LIBRARY_CHECK = 0x65766231  # what each library's evalbot_library_check returns ("evb1")
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


@dataclass(frozen=True)
class Toolchain:
    compiler: str
    flags: tuple[str, ...] = FLAGS
    kernel_headers: bool = False  # the system's linux/ and asm/ alone, for musl (which has none)


def toolchains(compiler: str | None = None) -> list[Toolchain]:
    """What to build with, in order: `compiler` alone if given; else musl, static, where it is
    installed, then the system's C compiler."""
    if compiler is not None:
        return [Toolchain(compiler)]
    found = []
    musl = shutil.which(MUSL)
    if musl:
        found.append(Toolchain(musl, (*FLAGS, "-static"), kernel_headers=True))
    system = find_compiler()
    if system:
        found.append(Toolchain(system))
    return found


def link_kernel_headers(folder: Path) -> None:
    """musl's headers do not include the kernel's: links in `folder` to the system's `linux/`,
    `asm-generic/` and this machine's `asm/`, and to nothing else, so that no glibc header can
    stand in for one musl lacks."""
    multiarch = Path(f"/usr/include/{platform.machine()}-linux-gnu/asm")
    links = {
        "linux": Path("/usr/include/linux"),
        "asm-generic": Path("/usr/include/asm-generic"),
        "asm": multiarch if multiarch.is_dir() else Path("/usr/include/asm"),
    }
    for name, target in links.items():
        if target.is_dir():
            (folder / name).symlink_to(target)


def native_runner(folder: Path, source: Path = SOURCE, compiler: str | None = None) -> Path | None:
    """The runner program in `folder` (compiled if missing), or None when it cannot be made."""
    return native_program(folder, source, compiler, instead="sandboxes run the Python runner")


def native_launcher(folder: Path, compiler: str | None = None) -> Path | None:
    """The launcher (launch.c) in `folder` (compiled if missing), or None."""
    instead = "the spawner forks itself to start bubblewrap"
    return native_program(folder, LAUNCH_SOURCE, compiler, instead=instead)


def native_library(
    folder: Path, source: Path, compiler: str | None = None, *, instead: str
) -> Path | None:
    """`source` compiled into a shared library in `folder` by the system compiler (or
    `compiler`), checked to load (compiled if missing), or None with a warning."""
    found = compiler or find_compiler()
    chain = [Toolchain(found, LIBRARY_FLAGS)] if found else []
    return first_built(folder, source, chain, instead, require_library_check)


def native_program(
    folder: Path, source: Path, compiler: str | None = None, *, instead: str
) -> Path | None:
    """`source` compiled into `folder` by the first toolchain that makes a program that runs,
    named by its stem and a digest (compiled if missing), or None with a warning saying what
    happens `instead`."""
    return first_built(folder, source, toolchains(compiler), instead, require_usage)


def first_built(
    folder: Path,
    source: Path,
    chain: list[Toolchain],
    instead: str,
    check: Callable[[Path], None],
) -> Path | None:
    if not chain:
        log.warning("evalbot: %s (no C compiler: cc, gcc or clang)", instead)
        return None
    for toolchain in chain:
        try:
            return built(folder, source, toolchain, check)
        except (OSError, subprocess.SubprocessError) as error:
            said = getattr(error, "stderr", None) or b""
            reason = f"{error} {said.decode(errors='replace')[-500:]}".strip()
            if toolchain != chain[-1]:
                log.info("evalbot: %s could not build %s (%s)", toolchain.compiler, source, reason)
                continue
            log.warning("evalbot: %s (%s failed: %s)", instead, source.name, reason)
    return None


def built(folder: Path, source: Path, toolchain: Toolchain, check: Callable[[Path], None]) -> Path:
    """`source` built by `toolchain` in `folder`, unless a file of that name is there, and
    `check`ed before it takes that name."""
    words = (toolchain.compiler, *toolchain.flags, f"kernel headers: {toolchain.kernel_headers}")
    named = source.read_bytes() + "\0".join(words).encode()
    target = folder / f"{source.stem}-{hashlib.sha256(named).hexdigest()[:16]}"
    if target.is_file():
        return target

    def build_into(partial: Path) -> None:
        made = BUILT.get(target.name)
        if made is not None and made.is_file():  # built for another folder by this process
            shutil.copyfile(made, partial)
        else:
            compile_program(toolchain, source, partial)
        partial.chmod(0o755)
        check(partial)

    make_in_place(target, build_into)
    BUILT[target.name] = target
    return target


def compile_program(toolchain: Toolchain, source: Path, output: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="evalbot-headers-") as headers:
        extra = []
        if toolchain.kernel_headers:
            link_kernel_headers(Path(headers))
            extra = ["-idirafter", headers]  # after musl's own headers
        subprocess.run(
            [toolchain.compiler, *toolchain.flags, *extra, "-o", str(output), str(source)],
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


def require_library_check(library: Path) -> None:
    """Loaded by a separate interpreter (a library that crashes as it loads takes no worker with
    it), its `evalbot_library_check` must return LIBRARY_CHECK."""
    probe = "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).evalbot_library_check())"
    done = subprocess.run(
        [sys.executable, "-c", probe, str(library)], capture_output=True, timeout=30
    )
    if done.returncode != 0 or done.stdout.strip() != str(LIBRARY_CHECK).encode():
        raise OSError(f"{library.name} did not load as built (exit {done.returncode})")
