"""End to end: secrets planted in the local secret store reach an agent that leaks them every way it
can — stdout, an exception on stderr, its answer, its transcript, an artifact, the world — and then
no log line, stored record, blob or rendered comment holds them.

Runs a real experiment: the Temporal dev server, the local sandbox provider, the store on SQLite.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent_repo import TINY_CATALOG
from tests.support.temporal import engine_settings_for
from workflows.catalog.models import ArmSpec
from workflows.engine.devserver import DevServer
from workflows.engine.repos import commit_all, init_repo
from workflows.redaction import Redactor
from workflows.secret_store import LocalSecretStore

SECRETS = {"LEAK_KEY_A": "sk-e2e-ALPHA-7f3a9c51d2", "LEAK_TOKEN_B": "tok-e2e-BRAVO-42d1e8b0"}
PROOF = hashlib.sha256(SECRETS["LEAK_KEY_A"].encode()).hexdigest()

EVALBOT_TOML = """\
[build]
setup = "true"
[run]
command = "python3 agent.py"
timeout_s = 60
[sandbox]
cpu = 1
memory_mb = 256
pids = 64
secrets = ["leaky"]
"""

LEAKY_AGENT = """\
import hashlib, json, os
from pathlib import Path

MODE = "answer"
out = Path(os.environ.get("EVALBOT_OUT_DIR", "/out"))
world = Path(os.environ.get("EVALBOT_WORLD_DIR", "/world"))
a, b = os.environ["LEAK_KEY_A"], os.environ["LEAK_TOKEN_B"]
print(f"my keys are {a} and {b}", flush=True)
(out / "answer.md").write_text(
    f"The key is {a}; the token is {b}.\\nproof {hashlib.sha256(a.encode()).hexdigest()}\\n"
)
(out / "transcript.jsonl").write_text(json.dumps({"kind": "tool", "env": {"a": a, "b": b}}) + "\\n")
(out / "usage.json").write_text(json.dumps({"input_tokens": 1, "output_tokens": 1, "cost_usd": 0}))
(out / "artifacts").mkdir(exist_ok=True)
(out / "artifacts" / "dump.txt").write_text(a + b)
(world / "leaked.md").write_text(f"{a} {b}")
if MODE == "crash":
    raise RuntimeError(f"failed while using {a} and {b}")
"""


def leaky_repo(path: Path) -> tuple[str, str]:
    """`base` leaks and answers; `head` leaks and then crashes with the secrets in its error."""
    init_repo(path)
    (path / "evalbot.toml").write_text(EVALBOT_TOML)
    (path / "agent.py").write_text(LEAKY_AGENT)
    base = commit_all(path, "leaky agent")
    (path / "agent.py").write_text(LEAKY_AGENT.replace('MODE = "answer"', 'MODE = "crash"'))
    return base, commit_all(path, "leaky agent that crashes")


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    """Every log record of the process, formatted with its traceback, as a handler would see it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


async def test_planted_secrets_appear_in_no_log_record_blob_or_comment(
    tmp_path: Path, temporal_server: DevServer, captured_logs: io.StringIO
) -> None:
    from bot.composition import open_store, session
    from bot.github.report_comment import comment_body
    from bot.render import render_markdown
    from workflows.engine import engine_client
    from workflows.engine.planning import plan_experiment
    from workflows.report import build_report

    settings = engine_settings_for(tmp_path / "evalbot", temporal_server, TINY_CATALOG)
    LocalSecretStore.from_settings(settings).replace({"leaky": SECRETS})
    base, head = leaky_repo(tmp_path / "agent")
    store = open_store(settings)
    spec = plan_experiment(
        settings,
        repo=str(tmp_path / "agent"),
        dataset="tiny",
        arms=[
            ArmSpec(name="base", ref="base", commit=base),
            ArmSpec(name="head", ref="head", commit=head),
        ],
        trials=1,
        case_selectors=["consent-draft"],
    )

    async with session(settings, store) as active:  # the composition root wires the secrets in
        await engine_client.start_experiment(active.client, settings, spec)
        await engine_client.wait_for(active.client, spec.experiment_id)

    runs = store.list_runs(spec.experiment_id)
    report = build_report(spec, runs)
    comment = comment_body(spec, render_markdown(report))  # the sticky PR comment
    store.close()

    # The secrets did reach the agent (its answer carries a hash of one) ...
    blobs = [p for p in settings.blob_dir.rglob("*") if p.is_file()]
    assert any(PROOF.encode() in p.read_bytes() for p in blobs), "the agent never got the secrets"
    assert {r.arm: r.status.value for r in runs}["head"] == "agent_error"
    # ... and appear nowhere once they leave the run: not in logs, records, the report, the
    # comment, nor in any file the service keeps (blobs, database, images), bar the secret store.
    files = [
        p
        for p in settings.data_dir.rglob("*")
        if p.is_file() and not p.is_symlink() and settings.secrets_dir not in p.parents
    ]
    texts = {
        "logs": captured_logs.getvalue(),
        "records": "\n".join(r.model_dump_json() for r in runs),
        "report": report.model_dump_json(),
        "comment": comment,
    }
    leaks = [
        name for name, text in texts.items() if Redactor(SECRETS.values()).redact(text) != text
    ]
    leaks += [
        str(p.relative_to(settings.data_dir))
        for p in files
        if any(v.encode() in p.read_bytes() for v in SECRETS.values())
    ]
    assert not leaks, "secret values found in: " + ", ".join(leaks)
