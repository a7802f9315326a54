"""evalbot beside Inspect AI: the same trivial experiment, back to back on one machine.

100 cases × 4 arms × 5 trials = 2,000 cells on evalbot (`process` and the isolated `local` provider,
each through benchmarks/orchestration.py: a real Temporal dev server, one worker, 128 cells in
flight; and `process` again with a worker process per core) and 100 samples × 20 epochs = 2,000
samples on Inspect AI (`sandbox="local"`, `mockllm/model`, `max_samples=128`, a solver running the
trivial agent's command in the sample's sandbox, then reading the answer it wrote, scored with
`includes()`). Inspect's Docker sandbox runs only where Docker answers (`docker info`); otherwise
one line says it was skipped.

Inspect is a benchmark dependency (the `bench` extra: `pip install -e '.[bench]'`), never imported
by the product. Every row carries the load average before and after it: these machines are shared,
so only the ratios within one run mean anything. Usage:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/peers.py [--cases 100 --trials 5] [--only NAME ...]
        [--tmpdir DIR]  # TMPDIR of every row (default: the system's)
        [--sandbox-dir DIR]  # evalbot's sandboxes only, in a fresh folder there
        [--rounds N]    # every row N times, the tools taking turns; goals judged on the medians
        [--write [--section peers]]   # the `peers` section of benchmarks/RESULTS.md

Every row keeps its sandboxes, store and dev server under the temporary folder, which the header
names with its file system type: on a file system without a journal (the root file system of the
VMs this was measured on), ext4 skips recently deleted inodes when it allocates one, and a run that
creates and removes many small files pays for it; evalbot spreads its sandboxes and staged outputs
over the disk's block groups to pay less (docs/sandbox.md, "The file system under the sandboxes").
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench_figures import commit, host, load
from results_check import INSPECT, LOCAL, PEERS_ROWS, PER_CORE, PROCESS, PeersReading
from results_file import write_section

from workflows.file_systems import file_system_of

HERE = Path(__file__).resolve().parent
ARMS = 4
CHOICES = ["process", "local", "process-per-core", "inspect-local", "inspect-docker"]
AGENT = "echo 'the answer is 42' > answer.md"  # benchmarks/trivial_matter.py's agent, in the cwd


@dataclass
class Row:
    name: str
    cells: int
    wall_s: float
    load_before: str
    load_after: str
    detail: str = ""
    stages: list[str] = field(default_factory=list)  # the local provider's per-stage table
    round: int = 1


def evalbot_row(
    provider: str, cases: int, trials: int, workers: int = 1, sandbox_dir: str | None = None
) -> Row:
    """benchmarks/orchestration.py in a process of its own; its output goes to our stderr.
    `workers` > 1 adds `evalbot worker` processes beside the benchmark's own (--workers);
    `sandbox_dir` puts its sandboxes (only) there (--sandbox-dir)."""
    before = load()
    command = [sys.executable, str(HERE / "orchestration.py"), "--provider", provider]
    command += ["--cases", str(cases), "--trials", str(trials), "--skip-baseline"]
    command += ["--workers", str(workers)]
    command += ["--sandbox-dir", sandbox_dir] if sandbox_dir else []
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stderr.write(done.stdout[-6000:])
    wall = re.search(r"^wall time: ([\d.]+) s", done.stdout, re.M)
    stored = re.search(r"^stored results: (.*)$", done.stdout, re.M)
    if done.returncode != 0 or wall is None:
        raise SystemExit(f"orchestration.py --provider {provider} failed: {done.stderr[-800:]}")
    cells = cases * ARMS * trials
    detail = f"stored {stored.group(1) if stored else '?'}"
    name = f"evalbot `{provider}`" + (f", {workers} workers" if workers > 1 else "")
    row = Row(name, cells, float(wall.group(1)), before, load(), detail)
    row.stages = stage_table_of(done.stdout)
    return row


def stage_table_of(output: str) -> list[str]:
    """The per-stage table orchestration.py prints for the local provider (empty otherwise)."""
    lines = output.splitlines()
    if "per-stage time of a local sandbox:" not in lines:
        return []
    start = lines.index("per-stage time of a local sandbox:") + 1
    table_lines = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table_lines.append(line)
    return table_lines


def inspect_row(sandbox: str, cases: int, epochs: int) -> Row:
    """Inspect AI in a process of its own (its event loop and logging stay out of ours)."""
    before = load()
    command = [sys.executable, __file__, "--inspect-child", sandbox, str(cases), str(epochs)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = re.search(r"^inspect: ([\d.]+) s, (.*)$", done.stdout, re.M)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"Inspect ({sandbox}) failed: {(done.stdout + done.stderr)[-800:]}")
    name = f'Inspect AI {inspect_version()}, `sandbox="{sandbox}"`'
    return Row(name, cases * epochs, float(found.group(1)), before, load(), found.group(2))


def inspect_version() -> str:
    from importlib.metadata import version

    return version("inspect-ai")


def inspect_child(sandbox: str, cases: int, epochs: int) -> None:
    """Run the Inspect task and print `inspect: <wall> s, <scores>`."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import Generate, TaskState, solver
    from inspect_ai.util import sandbox as current_sandbox

    @solver
    def trivial_agent():  # type: ignore[no-untyped-def]
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            box = current_sandbox()
            result = await box.exec(["/bin/sh", "-c", AGENT], timeout=60)
            state.output.completion = await box.read_file("answer.md") if result.success else ""
            return state

        return solve

    samples = [Sample(input="What is the answer?", target="42", id=i) for i in range(cases)]
    task = Task(dataset=samples, solver=trivial_agent(), scorer=includes(), sandbox=sandbox)
    with tempfile.TemporaryDirectory(prefix="evalbot-peers-inspect-") as logs:
        started = time.perf_counter()
        [log] = eval(
            task,
            model="mockllm/model",
            epochs=epochs,
            max_samples=128,
            log_dir=logs,
            display="none",
        )
        elapsed = time.perf_counter() - started
    scores = log.results.scores[0].metrics if log.results else {}
    accuracy = scores["accuracy"].value if "accuracy" in scores else float("nan")
    samples_done = log.results.completed_samples if log.results else 0
    print(f"inspect: {elapsed:.2f} s, status {log.status}, {samples_done} samples, "
          f"accuracy {accuracy:.2f}")  # fmt: skip


def docker_usable() -> bool:
    """A docker client and a daemon answering it."""
    if shutil.which("docker") is None:
        return False
    try:
        checked = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return False
    return checked.returncode == 0


def of_round(rows: list[Row], number: int, kind: str) -> Row | None:
    """The row of `kind` in round `number` (results_check.PEERS_ROWS knows the row names)."""
    return next((r for r in rows if r.round == number and PEERS_ROWS[kind](r.name)), None)


def table(rows: list[Row]) -> list[str]:
    """One table; the ratios are each row's wall time against Inspect's local sandbox and our
    `process` provider in the same round."""
    lines = [
        "| what | cells | wall s | cells/s | wall / Inspect local | wall / evalbot process "
        "| load before | load after | notes | round |",
        "|---|---:|---:|---:|---:|---:|---|---|---|---:|",
    ]
    for row in rows:
        inspect = of_round(rows, row.round, INSPECT)
        process = of_round(rows, row.round, PROCESS)
        to_inspect = f"{row.wall_s / inspect.wall_s:.2f}" if inspect else "-"
        to_process = f"{row.wall_s / process.wall_s:.2f}" if process else "-"
        lines.append(
            f"| {row.name} | {row.cells:,} | {row.wall_s:.1f} | {row.cells / row.wall_s:.1f} "
            f"| {to_inspect} | {to_process} | {row.load_before} | {row.load_after} "
            f"| {row.detail} | {row.round} |"
        )
    return lines


def median_of(ratios: list[float]) -> str:
    """The median, and each round's figure when there is more than one."""
    middle = f"{statistics.median(ratios):.2f}"
    if len(ratios) == 1:
        return middle
    return f"{middle} (median of {len(ratios)} rounds: {', '.join(f'{r:.2f}' for r in ratios)})"


def goals(rows: list[Row]) -> list[str]:
    """Issue 24's goals, checked against this run's rows: each ratio within a round (both sides
    under the same load), the verdict on their median — read as results_check.py reads the
    section, so that the summary it derives says the same."""
    walls: dict[str, dict[int, float]] = {}
    for row in rows:
        walls.setdefault(row.name, {})[row.round] = row.wall_s
    reading = PeersReading("", "", "", walls)
    lines = []
    for kind, label in ((PROCESS, "`process`"), (PER_CORE, "`process`, per core")):
        if ratios := reading.ratios(kind, INSPECT):
            verdict = "met" if statistics.median(ratios) <= 1.0 else "not met"
            lines.append(
                f"- {label} ÷ Inspect local: {median_of(ratios)} "
                f"(goal ≤ 1.00, every run durable): {verdict}"
            )
    wall = reading.wall(LOCAL)
    if (ratios := reading.ratios(LOCAL, PROCESS)) and wall is not None:
        verdict = "met" if statistics.median(ratios) <= 1.35 and wall <= 55 else "not met"
        lines.append(
            f"- `local` ÷ `process`: {median_of(ratios)}, `local` {wall:.1f} s "
            f"(goal ≤ 1.35 and ≤ 55 s): {verdict}"
        )
    return lines


def report(header: str, rows: list[Row], notes: list[str]) -> str:
    text = [header, "", *table(rows), "", *notes, *goals(rows)]
    rounds = max((row.round for row in rows), default=1)
    for row in rows:
        if row.stages:
            which = f"{row.name}, round {row.round}" if rounds > 1 else row.name
            text += ["", f"Per stage, {which} (benchmarks/stage_table.py):", "", *row.stages]
    return "\n".join(text)


def main(options: argparse.Namespace) -> None:
    wanted = set(options.only or CHOICES)
    epochs = ARMS * options.trials
    if options.tmpdir:  # every row's children inherit it: both tools' sandboxes live there
        os.environ["TMPDIR"] = options.tmpdir
    scratch = tempfile.gettempdir()
    header = (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {host()}; commit {commit()}; "
        f"{options.cases} cases × {ARMS} arms × {options.trials} trials; "
        f"temporary folder {scratch} ({file_system_of(scratch).describe()})"
    )
    if options.sandbox_dir:
        where = file_system_of(os.path.abspath(options.sandbox_dir)).describe()
        header += f"; evalbot's sandboxes in {options.sandbox_dir} ({where})"
    print(header, flush=True)
    notes: list[str] = []
    rows: list[Row] = []
    runs = {  # choice: provider, worker processes
        "process": ("process", 1),
        "local": ("local", 1),
        "process-per-core": ("process", os.cpu_count() or 1),
    }
    for number in range(1, options.rounds + 1):  # the tools take turns: each sees the load
        for name, (provider, workers) in runs.items():
            if name in wanted:
                rows.append(
                    evalbot_row(
                        provider, options.cases, options.trials, workers, options.sandbox_dir
                    )
                )
                rows[-1].round = number
        if "inspect-local" in wanted:
            rows.append(inspect_row("local", options.cases, epochs))
            rows[-1].round = number
        print(f"done, round {number}: " + ", ".join(
            f"{row.name} {row.wall_s:.1f} s" for row in rows if row.round == number
        ), flush=True)  # fmt: skip
    if "inspect-docker" in wanted:
        if not docker_usable():
            notes.append('Inspect AI `sandbox="docker"`: skipped, no usable Docker here.')
        else:
            rows.append(inspect_row("docker", options.cases, epochs))
    text = report(header, rows, notes)
    print(text)
    if options.write:
        command = shlex.join(["benchmarks/peers.py", *sys.argv[1:]])
        write_section(options.section, f"{DESCRIPTION.format(command=command)}\n\n{text}")


DESCRIPTION = """\
`PYTHONPATH=$PWD .venv/bin/python {command}` — the same trivial experiment back
to back: evalbot through benchmarks/orchestration.py (real Temporal dev server, one worker, 128
cells in flight; `--provider process`, then `--provider local`: bubblewrap, cgroups, a
loop-mounted ext4 disk per sandbox; then `process` with a worker process per core, `--workers`
= cores, the scale-out of docs/engine.md) and Inspect AI (the `bench` extra; `sandbox="local"`,
`mockllm/model`, 4 × trials epochs, `max_samples=128`, a solver that runs the same
`echo 'the answer is 42' > answer.md` in the sample's sandbox and reads the file back, scored with
`includes()`). Ratios are within one round (both tools under the same load); with `--rounds N`
every row runs N times, the tools taking turns, and each goal is judged on the median of its
per-round ratios. The load averages say how busy the machine was."""


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--inspect-child":
        os.environ.setdefault("INSPECT_LOG_LEVEL", "warning")
        inspect_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--trials", type=int, default=5, help="per arm; Inspect: 4 × this epochs")
    parser.add_argument("--only", nargs="*", choices=CHOICES)
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the rows this many times, taking turns"
    )
    parser.add_argument(
        "--tmpdir", help="TMPDIR of every row: where both tools' sandboxes and state live"
    )
    parser.add_argument(
        "--sandbox-dir", help="evalbot's sandboxes (only) in a fresh folder here (e.g. tmpfs)"
    )
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--section", default="peers", help="the RESULTS.md section --write sets")
    main(parser.parse_args())
