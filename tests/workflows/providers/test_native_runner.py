"""The runner compiled from C once per worker (workflows/providers/common/native_runner.py): made
once per source, checked to run, the Python runner when it cannot be made, and what a `local`
sandbox's pid 1 and a `process` sandbox's runner are. What the program does is tested beside
runner.py, in test_runner.py."""

from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.support.dead_process import dead_process_id
from tests.workflows.providers.kits import Kit, make_agent_repo, make_world, run_to_end
from workflows.process_owned import staging_path
from workflows.providers.common.native_runner import (
    SOURCE,
    find_compiler,
    native_launcher,
    native_library,
    native_runner,
)
from workflows.providers.local import LocalProvider
from workflows.providers.local.native_disk import SOURCE as DISK_OPS
from workflows.providers.process import ProcessProvider

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(find_compiler() is None, reason="no C compiler here"),
]


def test_compiled_once_per_source_and_runnable_by_every_sandbox_uid(tmp_path: Path) -> None:
    source = tmp_path / "runner.c"
    source.write_text(SOURCE.read_text())
    made = native_runner(tmp_path / "made", source)
    assert made is not None and made.parent == tmp_path / "made"
    assert made.stat().st_mode & 0o777 == 0o755
    made_at = made.stat().st_mtime_ns
    assert native_runner(tmp_path / "made", source) == made
    assert made.stat().st_mtime_ns == made_at  # not compiled again
    source.write_text(SOURCE.read_text() + "\n/* changed */\n")
    newer = native_runner(tmp_path / "made", source)
    assert newer is not None and newer != made
    assert sorted(os.listdir(tmp_path / "made")) == sorted([made.name, newer.name])  # no partial


def test_the_source_compiles_without_a_warning() -> None:
    compiler = find_compiler()
    assert compiler is not None
    flags = ["-std=gnu11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-fsyntax-only"]
    done = subprocess.run([compiler, *flags, str(SOURCE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


ET_DYN = 3


def elf_type(binary: Path) -> int:
    """e_type of an ELF file: 2 a program (ET_EXEC), 3 a shared object or PIE (ET_DYN)."""
    return int(struct.unpack_from("<H", binary.read_bytes(), 16)[0])


def interpreter_of(program: Path) -> bytes | None:
    """The dynamic loader a 64-bit ELF program names (its PT_INTERP header); None: static."""
    data = program.read_bytes()
    (table,) = struct.unpack_from("<Q", data, 0x20)
    entry_size, entries = struct.unpack_from("<HH", data, 0x36)
    for header in range(table, table + entry_size * entries, entry_size):
        if struct.unpack_from("<I", data, header)[0] == 3:  # PT_INTERP
            offset, _, _, size = struct.unpack_from("<QQQQ", data, header + 8)
            return data[offset : offset + size].rstrip(b"\0")
    return None


@pytest.mark.skipif(shutil.which("musl-gcc") is None, reason="no musl-gcc here (musl-tools)")
def test_with_musl_the_runner_and_the_launcher_are_static(tmp_path: Path) -> None:
    """Static with musl, neither program pays glibc's CPU detection at each start."""
    runner, launcher = native_runner(tmp_path / "made"), native_launcher(tmp_path / "made")
    assert runner is not None and launcher is not None
    assert interpreter_of(runner) is None and interpreter_of(launcher) is None
    compiler = find_compiler()
    assert compiler is not None
    system = native_runner(tmp_path / "system", compiler=compiler)  # what hosts without musl run
    assert system is not None and interpreter_of(system) is not None
    assert subprocess.run([str(runner)], capture_output=True).stderr == (
        subprocess.run([str(system)], capture_output=True).stderr
    )


@pytest.mark.skipif(shutil.which("musl-gcc") is None, reason="no musl-gcc here (musl-tools)")
def test_a_musl_build_sees_the_kernels_headers_but_no_glibc_header(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A glibc-only header would have been taken in silently had musl searched /usr/include."""
    source = tmp_path / "runner.c"
    source.write_text("#include <gnu/lib-names.h>\n" + SOURCE.read_text())  # glibc's only
    caplog.set_level(logging.INFO)
    made = native_runner(tmp_path / "made", source)
    assert made is not None and interpreter_of(made) is not None  # the system compiler's
    assert any("gnu/lib-names.h: No such file" in r.getMessage() for r in caplog.records)
    assert interpreter_of(native_runner(tmp_path / "musl") or Path()) is None  # linux/ found


def test_where_musl_cannot_build_the_system_compiler_does_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "bin" / "musl-gcc"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'musl-gcc: cannot build this' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", f"{broken.parent}:{os.environ['PATH']}")
    caplog.set_level(logging.INFO)
    made = native_runner(tmp_path / "made")
    assert made is not None and interpreter_of(made) is not None  # the system compiler's
    assert os.listdir(tmp_path / "made") == [made.name]  # nothing of the failed attempt is left
    assert warnings_of(caplog) == []
    assert any("cannot build this" in r.getMessage() for r in caplog.records)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_source_that_does_not_compile_leaves_the_python_runner_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = tmp_path / "runner.c"
    source.write_text("int main(void) { return undeclared_name; }\n")
    assert native_runner(tmp_path / "made", source) is None
    assert os.listdir(tmp_path / "made") == []  # no partial program left
    (warning,) = warnings_of(caplog)
    assert "Python runner" in warning and "undeclared_name" in warning  # the compiler's words


def test_no_compiler_leaves_the_python_runner(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert native_runner(tmp_path / "made") is None
    assert not (tmp_path / "made").exists()
    (warning,) = warnings_of(caplog)
    assert "no C compiler" in warning


def test_a_program_that_does_not_run_as_the_runner_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A "compiler" whose output runs but is no runner (a cross compiler, a wrapper gone wrong)."""
    fake = tmp_path / "fake-cc"
    fake.write_text(
        '#!/bin/sh\nwhile [ "$1" != -o ]; do shift; done\nprintf "#!/bin/sh\\n" > "$2"\n'
    )
    fake.chmod(0o755)
    assert native_runner(tmp_path / "made", compiler=str(fake)) is None
    assert os.listdir(tmp_path / "made") == []
    (warning,) = warnings_of(caplog)
    assert "did not run as built" in warning


def test_a_library_is_built_once_by_the_system_compiler_and_loaded(tmp_path: Path) -> None:
    """Shared libraries (local/disk_ops.c) come from the system compiler even where musl is
    installed: a static musl object cannot be loaded into the worker's Python."""
    made = native_library(tmp_path / "made", DISK_OPS, instead="Python does it")
    assert made is not None and elf_type(made) == ET_DYN  # a shared object
    assert b"libc.so.6" in made.read_bytes()  # glibc's, as the worker's Python
    built_at = made.stat().st_mtime_ns
    assert native_library(tmp_path / "made", DISK_OPS, instead="Python does it") == made
    assert made.stat().st_mtime_ns == built_at and os.listdir(tmp_path / "made") == [made.name]


def test_a_library_without_the_check_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Something that compiles and links but is not one of ours (no evalbot_library_check, or
    one that answers wrong) is refused before it takes its name."""
    for body in (
        "int unrelated(void) { return 0; }",
        "int evalbot_library_check(void) { return 1; }",
    ):
        source = tmp_path / "lib.c"
        source.write_text(body + "\n")
        assert native_library(tmp_path / "made", source, instead="Python does it") is None
    assert os.listdir(tmp_path / "made") == []
    assert len([w for w in warnings_of(caplog) if "did not load as built" in w]) == 2


def test_no_compiler_leaves_the_library_to_python(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert native_library(tmp_path / "made", DISK_OPS, instead="Python does it") is None
    (warning,) = warnings_of(caplog)
    assert "Python does it" in warning and "no C compiler" in warning


async def test_a_local_sandbox_runs_the_native_runner_as_its_pid_1_started_by_the_launcher(
    local_kit: Kit,
) -> None:
    sandbox = await local_kit.provider.create(local_kit.spec())
    try:
        script = (
            "tr '\\0' ' ' </proc/1/cmdline > /out/pid1.txt; grep -E '^(Uid|CapEff)' /proc/1/status"
        )
        state = await run_to_end(sandbox, f"{script} > /out/status.txt")
        pid_1 = (await sandbox.read_file("/out/pid1.txt")).decode()
        status = (await sandbox.read_file("/out/status.txt")).decode()
    finally:
        await sandbox.terminate()
    assert isinstance(local_kit.provider, LocalProvider)
    spawner = local_kit.provider.spawner
    serving = Path(f"/proc/{spawner.pid}/cmdline").read_bytes().split(b"\0")
    assert state["exit_code"] == 0
    assert pid_1.startswith("/evalbot/runner --out /out ")
    assert Path(serving[-2].decode()).name.startswith("launch-")  # bubblewrap came through it
    assert "CapEff:\t0000000000000000" in status  # the runner dropped everything itself
    assert "Uid:\t0\t" not in status


async def process_kit(base: Path) -> Kit:
    def make() -> ProcessProvider:
        return ProcessProvider(base / "sandboxes", base / "images", allowed=True)

    image = await make().build_image(make_agent_repo(base / "repo"), "main", "true")
    return Kit("process", base, make, base / "repo", image, make_world(base / "world"))


async def cmdline_of_runner(provider: ProcessProvider, kit: Kit) -> bytes:
    """The command line of a `process` sandbox's runner, while its agent sleeps."""
    sandbox = await provider.create(kit.spec())
    try:
        await sandbox.start("sleep 30")
        runner = await sandbox.known_runner()  # type: ignore[attr-defined]
        assert runner is not None
        return Path(f"/proc/{runner['pid']}/cmdline").read_bytes()
    finally:
        await sandbox.terminate()


async def test_a_process_sandbox_runs_the_native_runner(tmp_path: Path) -> None:
    kit = await process_kit(tmp_path)
    provider = kit.make()
    try:
        argv = (await cmdline_of_runner(provider, kit)).split(b"\0")
        assert Path(argv[0].decode()).name.startswith("runner-")  # the program itself
        assert argv[1] == b"--ready-fd" and b"--out" in argv
        assert provider.spawner.launcher is not None
    finally:
        provider.close()


async def test_without_a_compiler_a_process_sandbox_runs_the_python_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit = await process_kit(tmp_path)
    monkeypatch.setenv(
        "PATH", str(tmp_path / "no-tools")
    )  # no cc (the spawner's python is absolute)
    provider = kit.make()
    try:
        cmdline = await cmdline_of_runner(provider, kit)
    finally:
        provider.close()
    assert b"runner.py\0--serve" in cmdline  # a fork of the spawner, running its Python runner


def test_half_made_programs_of_a_dead_worker_are_reaped_by_the_process_provider(
    tmp_path: Path,
) -> None:
    """A worker killed while compiling leaves a staging file named by its process; the process
    provider's reaping at a worker's start removes it and keeps what a live process makes."""
    provider = ProcessProvider(tmp_path / "s", tmp_path / "i", allowed=True)
    folder = provider.sandbox_dir / ".runner"
    folder.mkdir(parents=True)
    (folder / f".runner-abc.123.{dead_process_id()}").write_bytes(b"half")
    live = staging_path(folder / "launch-abc")
    live.write_bytes(b"being made by this live process")
    provider.reap_orphans()
    assert list(folder.iterdir()) == [live]
