"""A 20-case dataset and an agent repository whose PR answers better on some cases and fails on
the others — the shape that a verdict which ignores failures gets wrong (docs/statistics.md).

Every case has two binary criteria: `answered` (the answer says ANSWER) and `complete` (it says
COMPLETE). The base agent answers every case half-way (0.5). The head agent answers the first
`better` cases completely (1.0) and, on the rest, does what `failure` says:

- "crash": exits 1 — the agent's failure, scored 0;
- "kill-runner": kills its runner — the sandbox dies under the engine, an infrastructure
  failure (re-provisioned, then `sandbox_error`, excluded).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.agent_repo import AgentRepo
from workflows.engine.repos import commit_all, init_repo

CASES = 20
BETTER = 8

AGENT = '''"""Test agent: see tests/support/crashy_agent.py."""
import json, os, signal, sys
from pathlib import Path

MODE = "base"
BETTER = {better}
FAILURE = "{failure}"

case = json.loads(Path("/case/case.json").read_text())
number = int(case["id"].removeprefix("c"))
out = Path("/out")
if MODE == "base":
    answer = "ANSWER"
elif number <= BETTER:
    answer = "ANSWER COMPLETE"
elif FAILURE == "crash":
    print("Traceback (most recent call last): boom", file=sys.stderr)
    sys.exit(1)
else:
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(0)
(out / "answer.md").write_text(answer + "\\n")
'''

EVALBOT_TOML = """[build]
setup = "{setup}"
incremental = "{setup}"

[run]
command = "python3 agent.py"
timeout_s = 60

[sandbox]
cpu = 1
memory_mb = 256
pids = 64
allow_domains = []
secrets = []
"""

CASE_TOML = """prompt = "Case {case_id}: answer it."

[[criteria]]
name = "answered"
grader = "contains_any"
params = {{ values = ["ANSWER"] }}

[[criteria]]
name = "complete"
grader = "contains_any"
params = {{ values = ["COMPLETE"] }}
"""

OK_SETUP = "python3 -m compileall -q ."


def write_catalog(root: Path, cases: int = CASES) -> Path:
    """Dataset `twenty` over the one-document world `plain`, under `root`."""
    world = root / "worlds" / "plain"
    (world / "documents").mkdir(parents=True)
    (world / "world.toml").write_text('name = "plain"\ndescription = "One note."\n')
    (world / "documents" / "note.md").write_text("Nothing to see here.\n")
    dataset = root / "datasets" / "twenty"
    dataset.mkdir(parents=True)
    (dataset / "dataset.toml").write_text(
        'name = "twenty"\ndescription = "Crashy-agent fixture."\nworld = "plain"\n'
        "default_trials = 1\n"
    )
    for number in range(1, cases + 1):
        case_id = f"c{number:02d}"
        folder = dataset / "cases" / case_id
        folder.mkdir(parents=True)
        (folder / "case.toml").write_text(CASE_TOML.format(case_id=case_id))
    return root


def crashy_agent_repo(
    dest: Path, *, failure: str = "crash", better: int = BETTER, head_setup: str = OK_SETUP
) -> AgentRepo:
    """Base: every case at 0.5. Head: cases 1..`better` at 1.0, the rest fail (`failure`);
    `head_setup` replaces the head commit's build step (e.g. one that fails)."""
    init_repo(dest)
    agent = AGENT.format(better=better, failure=failure)
    (dest / "agent.py").write_text(agent)
    (dest / "evalbot.toml").write_text(EVALBOT_TOML.format(setup=OK_SETUP))
    base = commit_all(dest, "base agent")
    (dest / "agent.py").write_text(agent.replace('MODE = "base"', 'MODE = "head"'))
    (dest / "evalbot.toml").write_text(EVALBOT_TOML.format(setup=head_setup))
    head = commit_all(dest, "head agent")
    return AgentRepo(dest, base, head)
