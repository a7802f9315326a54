"""Reset-to-commit and sandbox provisioning on the `local` provider (docs/prewarm.md), and reset
on the `modal` provider against the Modal test server (`--provider modal`).

    .venv/bin/python benchmarks/reset.py [--reps 2] [--samples 100] [--no-record]
    .venv/bin/python benchmarks/reset.py --provider modal [--reps 2] [--start-latency 2.7]

1. Full build vs reset. The sample agent (examples/legal-agent) with a realistic dependency set:
   its code plus `requirements.txt` naming httpx, pydantic, jinja2, sqlalchemy, numpy, pandas,
   pypdf, python-docx, rich and requests (and their dependencies, ~40 distributions). Sandboxes have
   no network, so the packages come from a wheelhouse committed in the repository (`wheels/`),
   repacked here from the distributions installed in this venv (offline, no registry involved);
   `build.setup` makes a venv and `pip install --no-index --find-links wheels -r requirements.txt`,
   `build.incremental` recompiles the agent's code. The full build is a cold `build_image` of a
   commit three commits ahead of the prewarmed one (three code changes); the reset is the same
   `build_image` after `prewarm` of the base commit. Both run the real builds in bubblewrap.
2. Provisioning latency: `create` from a warm image (built, overlay-mounted) and from the warm
   pool (a claim), p50/p99 over --samples sandboxes each, plus create-until-the-runner-runs.

Appends the figures, with date and machine, to benchmarks/RESULTS.md under "## Reset and
provisioning" (unless --no-record).

`--provider modal`: the same repository and the same two builds (1.), on the real `modal` SDK
against the Modal test server (tests/fakes/modal_server: Modal's gRPC protocol, sandboxes in
bubblewrap containers, images published by name), each build in a build sandbox as on Modal:
the full build uploads the checkout and runs `build.setup`; the reset starts from the prewarmed
image, uploads a git bundle of the three commits, checks out and runs `build.incremental`. Each
repetition builds from its own clone of the repository (image names are per repository path), so
nothing is found already built. No provisioning figures (benchmarks/modal.py measures creation on
Modal). Writes its own section of benchmarks/RESULTS.md ("reset-modal", unless --no-record).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import csv
import hashlib
import importlib.metadata as metadata
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/modal.py is named like the SDK: keep this folder off the path so `import modal` finds
# the SDK, and put the repository root on it (workflows, tests.fakes, benchmarks.*).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from packaging.markers import default_environment  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402

from benchmarks.bench_figures import commit, machine, paired_ratios, stamp  # noqa: E402
from benchmarks.results_file import write_section  # noqa: E402
from workflows.prewarm.image_label import split_reference  # noqa: E402
from workflows.providers.base import SandboxSpec  # noqa: E402
from workflows.providers.local import LocalProvider  # noqa: E402

AGENT = ROOT / "examples" / "legal-agent"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
HEADING = "## Reset and provisioning"
REQUIREMENTS = ("httpx", "pydantic", "jinja2", "sqlalchemy", "numpy", "pandas", "pypdf",
                "python-docx", "rich", "requests")  # fmt: skip
TOML = """# The sample agent with a realistic dependency set (benchmarks/reset.py).
[build]
setup = "python3 -m venv .venv && .venv/bin/pip install --quiet --no-cache-dir --no-index --find-links wheels -r requirements.txt && .venv/bin/python -m compileall -q legal_agent"
incremental = ".venv/bin/python -m compileall -q legal_agent"
[run]
command = ".venv/bin/python -m legal_agent"
timeout_s = 120
"""  # noqa: E501
TOML_SETUP = TOML.split('setup = "', 1)[1].split('"\n', 1)[0]


# -- a wheelhouse from the installed distributions --------------------------------------------


def closure(names: tuple[str, ...]) -> list[metadata.Distribution]:
    """The distributions `names` need, their dependencies included (markers evaluated here)."""
    environment = {key: str(value) for key, value in default_environment().items()}
    environment["extra"] = ""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                todo.append(requirement.name)
    return sorted(seen.values(), key=lambda d: d.metadata["Name"].lower())


def repack(dist: metadata.Distribution, wheels: Path) -> Path:
    """An installed distribution back into a wheel: the files its RECORD lists, a fresh RECORD."""
    site = Path(str(dist.locate_file("")))
    info = next(p for p in (dist.files or []) if p.parts[0].endswith(".dist-info"))
    info_dir = info.parts[0]
    wheel = (site / info_dir / "WHEEL").read_text().splitlines()
    tags = [line.split(":", 1)[1].strip() for line in wheel if line.startswith("Tag:")]
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    parts = [tag.split("-") for tag in tags]  # py2-none-any + py3-none-any -> py2.py3-none-any
    tag = "-".join(".".join(sorted({p[i] for p in parts})) for i in range(3))
    target = wheels / f"{name}-{dist.version}-{tag}.whl"
    rows = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for file in dist.files or []:
            path = site / file
            skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
            if ".." in file.parts or "__pycache__" in file.parts or not path.is_file():
                continue
            if file.parts[0] == info_dir and file.name in skip:
                continue
            data = path.read_bytes()
            archive.writestr(str(file), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            rows.append((str(file), f"sha256={digest.decode()}", str(len(data))))
        record = io.StringIO()
        csv.writer(record, lineterminator="\n").writerows([*rows, (f"{info_dir}/RECORD", "", "")])
        archive.writestr(f"{info_dir}/RECORD", record.getvalue())
    return target


# -- the agent repository ---------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@localhost",
         *args], check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


def make_repo(path: Path) -> tuple[Path, str, str, int]:
    """The agent at a base commit and three code changes later; returns (repo, base, ahead, n)."""
    shutil.copytree(AGENT, path, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    (path / "evalbot.toml").write_text(TOML)
    dists = closure(REQUIREMENTS)
    (path / "wheels").mkdir()
    for dist in dists:
        repack(dist, path / "wheels")
    (path / "requirements.txt").write_text("".join(f"{name}\n" for name in REQUIREMENTS))
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    git(path, "add", "--all")
    git(path, "commit", "-qm", "base")
    base = git(path, "rev-parse", "HEAD")
    modules = sorted((path / "legal_agent").glob("*.py"))
    for step in range(3):
        module = modules[step % len(modules)]
        module.write_text(module.read_text() + f"\n# change {step + 1}\n")
        git(path, "commit", "-qam", f"change {step + 1}")
    return path, base, git(path, "rev-parse", "HEAD"), len(dists)


# -- measurements -----------------------------------------------------------------------------


async def timed_build(
    base: Path, repo: Path, commit: str, prewarm: str | None
) -> tuple[float, str]:
    provider = LocalProvider(base / "sandboxes", base / "images")
    if prewarm is not None:
        await provider.prewarm(repo, prewarm, TOML_SETUP)
    started = time.perf_counter()
    reference = await provider.build_image(repo, commit, TOML_SETUP)
    seconds = time.perf_counter() - started
    origin = split_reference(reference)[1]
    return seconds, origin.kind if origin else "?"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def provisioning(
    base: Path, image: str, samples: int, pool: bool
) -> tuple[list[float], list[float]]:
    """create() latencies, and create()+start() until the runner runs, in ms."""
    provider = LocalProvider(base / "sandboxes", base / "images", warm_pool_size=4 if pool else 0)
    world = base / "world"
    world.mkdir(exist_ok=True)
    for index in range(20):
        (world / f"doc-{index}.md").write_text("clause " * 500)
    creates, starts = [], []
    for sample in range(samples):
        if provider.pool is not None:
            await provider.pool.fill()  # every claim finds a ready sandbox (refills not counted)
        spec = SandboxSpec(f"bench/case/arm/{sample}", image, world, {"case.json": b"{}"})
        started = time.perf_counter()
        sandbox = await provider.create(spec)
        created = time.perf_counter()
        await sandbox.start("true")
        running = time.perf_counter()
        creates.append((created - started) * 1000)
        starts.append((running - started) * 1000)
        await sandbox.terminate()
    if provider.pool is not None:
        await provider.pool.drain()
    return creates, starts


async def main(args: argparse.Namespace) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="evalbot-bench-reset-"))
    try:
        repo, base_sha, ahead, n_dists = make_repo(work / "agent")
        wheels_mb = sum(p.stat().st_size for p in (repo / "wheels").iterdir()) / (1 << 20)
        print(f"agent: {n_dists} distributions, wheelhouse {wheels_mb:.0f} MiB", flush=True)
        full, reset = [], []
        for rep in range(args.reps):
            seconds, kind = await timed_build(work / f"cold-{rep}", repo, ahead, None)
            assert kind == "cold", kind
            full.append(seconds)
            seconds, kind = await timed_build(work / f"warm-{rep}", repo, ahead, base_sha)
            assert kind == "reset", kind
            reset.append(seconds)
            print(f"rep {rep + 1}: full {full[-1]:.1f} s, reset {reset[-1]:.2f} s", flush=True)
        warm = LocalProvider(work / "warm-0" / "sandboxes", work / "warm-0" / "images")
        image = await warm.build_image(repo, ahead, TOML_SETUP)  # cached: the reset's image
        lat_image = await provisioning(work / "warm-0", image, args.samples, pool=False)
        lat_pool = await provisioning(work / "warm-0", image, args.samples, pool=True)
        return summarize(full, reset, lat_image, lat_pool, n_dists, wheels_mb)
    finally:
        await asyncio.to_thread(clean_up, work)


def clean_up(work: Path) -> None:
    """Unmount the overlays left under `work` (innermost first), then delete it."""
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for path in sorted((m for m in mounts if m.startswith(f"{work}/")), reverse=True):
        subprocess.run(["umount", "--lazy", path], check=False)
    shutil.rmtree(work, ignore_errors=True)


def summarize(
    full: list[float],
    reset: list[float],
    lat_image: tuple[list[float], list[float]],
    lat_pool: tuple[list[float], list[float]],
    n_dists: int,
    wheels_mb: float,
) -> dict[str, object]:
    def stats(values: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(values, 0.5), 1), "p99": round(percentile(values, 0.99), 1)}

    full_s, reset_s = statistics.median(full), statistics.median(reset)
    ratio, low, high = paired_ratios(full, reset)  # each pair ran under the same load
    return {
        "distributions": n_dists, "wheelhouse_mib": round(wheels_mb),
        "full_build_s": round(full_s, 2), "reset_s": round(reset_s, 2),
        "ratio": round(ratio, 1), "ratio_range": [round(low, 1), round(high, 1)],
        "create_from_image_ms": stats(lat_image[0]), "running_from_image_ms": stats(lat_image[1]),
        "create_from_pool_ms": stats(lat_pool[0]), "running_from_pool_ms": stats(lat_pool[1]),
        "samples": len(lat_image[0]), "reps": len(full),
    }  # fmt: skip


def record(result: dict[str, object]) -> None:
    """Add a row to this benchmark's table (the section is created the first time)."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    if HEADING not in text:
        text = text.rstrip("\n") + "\n\n" + SECTION
    lines = text.splitlines(keepends=True)
    last = start = next(i for i, line in enumerate(lines) if line.strip() == HEADING)
    for index in range(start + 1, len(lines)):
        if lines[index].startswith("## "):
            break
        if lines[index].startswith("|"):
            last = index
    lines.insert(last + 1, row_of(result))
    RESULTS.write_text("".join(lines))


def row_of(result: dict[str, object]) -> str:
    return (
        f"| {date.today().isoformat()} | {machine()} | {result['distributions']} dists, "
        f"{result['wheelhouse_mib']} MiB wheels | {result['full_build_s']} s | "
        f"{result['reset_s']} s | {result['ratio']}× ({fmt_range(result['ratio_range'])}) | "
        f"{fmt(result['create_from_image_ms'])} | {fmt(result['create_from_pool_ms'])} | "
        f"{fmt(result['running_from_image_ms'])} | {fmt(result['running_from_pool_ms'])} |\n"
    )


def fmt_range(value: object) -> str:
    assert isinstance(value, list)
    return f"{value[0]:g}–{value[1]:g}×"


def fmt(value: object) -> str:
    assert isinstance(value, dict)
    return f"{value['p50']:.0f} / {value['p99']:.0f} ms"


SECTION = f"""{HEADING}

`.venv/bin/python benchmarks/reset.py` — the sample agent (examples/legal-agent) with a realistic
dependency set (its requirements.txt names httpx, pydantic, jinja2, sqlalchemy, numpy, pandas, pypdf,
python-docx, rich and requests; with their dependencies the wheelhouse holds the distributions
below). Sandboxes have no network, so the wheels are committed in the agent repository (`wheels/`),
repacked offline from this venv's installed distributions, and `build.setup` installs them with
`pip --no-index`. **Full build**: a cold `build_image` of a commit three code changes ahead of the
base (clone, venv, pip install, compile). **Reset**: the same `build_image` after `prewarm` of the
base: overlayfs on the prewarmed snapshot, fetch + checkout, `build.incremental` (compile the agent's
code). Medians over the repetitions, each on fresh image folders; the ratio is the median of the
per-repetition ratios (full and reset of one repetition run back to back, under the same load), with
their range. **Provisioning**: `create` of a
sandbox (20-file world) from the warm image and from the warm pool (claims; refills not timed), and
create + start until the runner runs, p50 / p99 over the samples. Targets: reset ≥ 10× faster than a
full build; provisioning p50 < 150 ms, p99 < 500 ms.

| date | machine | agent | full build | reset | full / reset | create from image p50 / p99 | create from pool p50 / p99 | running from image p50 / p99 | running from pool p50 / p99 |
|---|---|---|---:|---:|---:|---:|---:|---:|---:|
"""  # noqa: E501


# -- the modal provider against the Modal test server -----------------------------------------

MODAL_SECTION = "reset-modal"


async def main_modal(args: argparse.Namespace) -> dict[str, object]:
    """Full build vs reset on Modal: the repository and builds of `main`, on the test server."""
    import modal

    from tests.fakes.modal_server.fixture import host_problem, running_modal_server
    from workflows.providers.modal import ModalConfig, ModalProvider

    problem = host_problem()
    if problem:
        raise SystemExit(f"the Modal test server cannot run here: {problem}")
    work = Path(tempfile.mkdtemp(prefix="evalbot-bench-reset-modal-"))
    try:
        repo, base_sha, ahead, n_dists = make_repo(work / "agent")
        wheels_mb = sum(p.stat().st_size for p in (repo / "wheels").iterdir()) / (1 << 20)
        print(f"agent: {n_dists} distributions, wheelhouse {wheels_mb:.0f} MiB", flush=True)
        knobs = {"start_latency_s": args.start_latency}
        with running_modal_server(work / "cloud", **knobs) as server:
            os.environ.update(server.env)  # before the first `modal` call

            def provider() -> ModalProvider:
                config = ModalConfig(app_name="evalbot-bench-reset", spool_dir=work / "spool")
                return ModalProvider(modal, config)

            (work / "spool").mkdir()
            full, reset, prewarm = [], [], []
            for rep in range(args.reps):
                cold = clone(repo, work / f"cold-{rep}")
                seconds, kind = await timed(provider(), cold, ahead)
                assert kind == "cold", kind
                full.append(seconds)
                warm = clone(repo, work / f"warm-{rep}")
                started = time.perf_counter()
                await provider().prewarm(warm, base_sha, TOML_SETUP)
                prewarm.append(time.perf_counter() - started)
                seconds, kind = await timed(provider(), warm, ahead)
                assert kind == "reset", kind
                reset.append(seconds)
                print(f"rep {rep + 1}: full {full[-1]:.1f} s, reset {reset[-1]:.2f} s "
                      f"(prewarm {prewarm[-1]:.1f} s)", flush=True)  # fmt: skip
            alive = server.stats()["alive"]
            image_mib = max(tree_size(i) for i in (server.cloud.root / "images").iterdir()) >> 20
        ratio, low, high = paired_ratios(full, reset)
        return {
            "distributions": n_dists, "wheelhouse_mib": round(wheels_mb),
            "full_build_s": round(statistics.median(full), 2),
            "reset_s": round(statistics.median(reset), 2),
            "prewarm_s": round(statistics.median(prewarm), 2),
            "ratio": round(ratio, 1), "ratio_range": [round(low, 1), round(high, 1)],
            "reps": len(full), "start_latency_s": args.start_latency, "alive_after": alive,
            "image_mib": image_mib,
        }  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tree_size(folder: Path) -> int:
    """Bytes of the regular files below `folder` (links not followed)."""
    return sum(
        (Path(top) / name).lstat().st_size
        for top, _, names in os.walk(folder)
        for name in names
        if (Path(top) / name).is_file() and not (Path(top) / name).is_symlink()
    )


def clone(repo: Path, dest: Path) -> Path:
    """A repository of its own: Modal image names are per repository path."""
    subprocess.run(["git", "clone", "-q", str(repo), str(dest)], check=True)
    return dest


async def timed(provider: object, repo: Path, commit: str) -> tuple[float, str]:
    """`build_image` of `commit`, in seconds, and the kind its origin says (cold, reset, ...)."""
    started = time.perf_counter()
    reference = await provider.build_image(repo, commit, TOML_SETUP)  # type: ignore[attr-defined]
    seconds = time.perf_counter() - started
    origin = split_reference(reference)[1]
    return seconds, origin.kind if origin else "?"


MODAL_PROSE = """### Reset on Modal (benchmarks/reset.py --provider modal)

`{command}` — the agent and the two builds of "Reset and provisioning" above, on the `modal`
provider (real `modal` SDK) against the Modal test server (tests/fakes/modal_server), each build in
a Modal build sandbox. **Full build**: `build_image` of the commit three code changes ahead,
nothing prewarmed: the checkout packed and uploaded into a sandbox from the base image,
`build.setup` (venv, pip install from the wheelhouse, compile), the sandbox's filesystem
snapshotted and published. **Reset**: the same `build_image` after `prewarm` of the base commit
(itself a full build, timed apart as "prewarm"): a sandbox from the prewarmed image, a git bundle of
the three commits uploaded, checkout, `build.incremental`, snapshot, publish. Each repetition on its
own clone (image names are per repository path); medians, and the median of the per-repetition
ratios with their range. The server's start latency was {latency} s for every sandbox (Modal
publishes 2.7 s p50), with no rate limit.

What the test server does not model: no real network (the SDK talks to it over loopback: uploads
and downloads cost no bandwidth and no round-trip latency, and pip installs offline from the
wheelhouse on both sides); an image is a folder on the server's disk, copied whole (`cp -a`; no
reflinks on this ext4) into every sandbox created from it and copied whole again by every snapshot,
where real Modal loads an image's files lazily and stores snapshots remotely, at costs that grow
differently with the image's size (the largest image here: {image_mib} MiB, the venv with numpy and
pandas); no image cache and no cold-storage latency for a newly published image; the containers are
bubblewrap sandboxes sharing this machine's 2 cores with the client, the server and other work, not
dedicated cloud workers. The reset does little besides those two copies (create from the
prewarmed image, snapshot), so its time here is mostly copying, and the ratio is not the one to
expect on Modal; the local provider's row above (overlayfs, no copies) shows the work itself.

Run {started} on {machine}, commit {commit}.

| date | full build | reset | full / reset | prewarm (a full build of the base) | agent | reps | left running |
|---|---:|---:|---:|---:|---|---:|---:|
| {date} | {full} s | {reset} s | {ratio}× ({ratio_range}) | {prewarm} s | {dists} dists, {wheels} MiB wheels | {reps} | {alive} |
"""  # noqa: E501


def modal_section(result: dict[str, object], started: str, where: str, argv: list[str]) -> str:
    return MODAL_PROSE.format(
        command=" ".join(["benchmarks/reset.py", *argv]),
        latency=result["start_latency_s"],
        started=started,
        machine=where,
        commit=commit(),
        date=started.split()[0],
        full=result["full_build_s"],
        reset=result["reset_s"],
        ratio=result["ratio"],
        ratio_range=fmt_range(result["ratio_range"]),
        prewarm=result["prewarm_s"],
        dists=result["distributions"],
        wheels=result["wheelhouse_mib"],
        reps=result["reps"],
        alive=result["alive_after"],
        image_mib=result["image_mib"],
    )


def run_modal(options: argparse.Namespace) -> None:
    started, load_start = stamp(), os.getloadavg()[0]
    outcome = asyncio.run(main_modal(options))
    print(json.dumps(outcome, indent=1))
    print(f"modal: full build {outcome['full_build_s']} s, reset {outcome['reset_s']} s: "
          f"{outcome['ratio']}x faster")  # fmt: skip
    where = f"{machine().rsplit(', load avg', 1)[0]}, load avg {load_start:.1f} → "
    where += f"{os.getloadavg()[0]:.1f}"
    text = modal_section(outcome, started, where, sys.argv[1:])
    print(text)
    if not options.no_record:
        write_section(MODAL_SECTION, text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--provider", choices=("local", "modal"), default="local")
    parser.add_argument("--start-latency", type=float, default=2.7,
                        help="modal: the server's start latency per sandbox (s)")  # fmt: skip
    options = parser.parse_args()
    if options.provider == "modal":
        run_modal(options)
        raise SystemExit(0)
    outcome = asyncio.run(main(options))
    print(json.dumps(outcome, indent=1))
    print(f"full build {outcome['full_build_s']} s, reset {outcome['reset_s']} s: "
          f"{outcome['ratio']}x faster")  # fmt: skip
    if not options.no_record:
        record(outcome)
