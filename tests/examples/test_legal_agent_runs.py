"""The sample legal agent run end to end, as a sandbox would run it: outputs, knobs, seeds, the
optional model call, and failures."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest

from tests.conftest import REPO_ROOT
from workflows.catalog.loaders import load_agent_config

CAP = "What is the cap on Beta's liability under the Kestrel supply agreement?"
NON_ENGLISH = (
    "Which of Beta's contracts are governed by a law other than the law of England and Wales?"
)
QUANTA_SUMMARY = "Summarise the issues the Quanta licence raises for the acquisition."
PRIVILEGED = ("documents/advice/", "documents/board/")


def test_evalbot_toml_is_valid_and_modest() -> None:
    config = load_agent_config(REPO_ROOT / "examples" / "legal-agent")
    assert config.run.command == ".venv/bin/python -m legal_agent"
    assert "--without-pip" in config.build.setup and "compileall" in config.build.setup
    assert config.sandbox.memory_mb <= 1024 and config.sandbox.pids <= 128
    assert config.sandbox.allow_domains == ()


def test_a_run_writes_answer_transcript_and_usage(legal) -> None:
    run = legal(CAP)
    assert run.exit_code == 0, run.stderr
    assert "€2,500,000" in run.answer and "clause 12.2" in run.answer
    assert "documents/contracts/supply-kestrel-automotive.docx" in run.answer
    kinds = [step["type"] for step in run.steps]
    assert kinds[0] == "start" and kinds[-1] == "answer"
    assert {"matter", "plan", "link", "read"} <= set(kinds)
    assert [s["step"] for s in run.steps] == list(range(1, len(run.steps) + 1))
    usage = run.usage
    assert usage["input_tokens"] > 200 and usage["output_tokens"] > 20
    expected = (usage["input_tokens"] * 0.15 + usage["output_tokens"] * 0.60) / 1_000_000
    assert usage["cost_usd"] == pytest.approx(expected, abs=1e-6)


def test_the_model_knob_changes_the_price_not_the_work(legal) -> None:
    mini, large = legal(CAP), legal(CAP, config={"model": "gpt-4o"})
    assert mini.usage["input_tokens"] == large.usage["input_tokens"]
    assert large.usage["cost_usd"] > 10 * mini.usage["cost_usd"]


def test_retriever_spread_and_top_k_change_what_is_found_and_read(legal) -> None:
    narrow = legal(NON_ENGLISH, config={"retriever": "keyword", "top_k": "6"})
    wide = legal(NON_ENGLISH, config={"retriever": "bm25", "spread": "true"})
    assert narrow.steps_of("search")[0]["retriever"] == "keyword"
    assert wide.steps_of("search")[0]["retriever"] == "bm25"
    for counterparty in ("Polaris", "Orion", "Lumen", "Vega", "Quanta", "Helix", "Havenzicht"):
        assert counterparty in wide.answer
    assert "Havenzicht" not in narrow.answer
    assert wide.usage["input_tokens"] > narrow.usage["input_tokens"]
    small = legal(NON_ENGLISH, config={"retriever": "bm25", "top_k": "2"})
    assert len(small.steps_of("search")[0]["hits"]) == 2
    assert small.usage["input_tokens"] < wide.usage["input_tokens"]


def test_permissions_knob(legal) -> None:
    respected = legal(QUANTA_SUMMARY, config={"retriever": "bm25", "spread": "true"})
    ignored = legal(
        QUANTA_SUMMARY, config={"retriever": "bm25", "spread": "true", "permissions": "ignore"}
    )
    assert "14.3" in respected.answer and "14.3" in ignored.answer
    assert not any(p in respected.answer for p in PRIVILEGED)
    assert any(p in ignored.answer for p in PRIVILEGED)


def test_trials_differ_through_the_seed(legal, legal_agent_package) -> None:
    from legal_agent.config import Settings
    from legal_agent.run import Slips

    rate = Settings().slip_rate
    slipping = next(s for s in range(1000) if Slips.draw(s, rate).cite_titles)
    careful = next(s for s in range(1000) if not Slips.draw(s, rate).cite_titles)
    slipped, clean = legal(CAP, seed=slipping), legal(CAP, seed=careful)
    assert "supply-kestrel-automotive.docx" in clean.answer
    assert "supply-kestrel-automotive.docx" not in slipped.answer
    assert "Component Supply Agreement" in slipped.answer
    assert legal(CAP, seed=careful).answer == clean.answer


def test_drafting_writes_into_the_world_and_the_database(legal) -> None:
    run = legal(
        "Draft Beta's request for Orion's consent under the distribution agreement, save it as "
        "drafts/orion-consent-request.md, and record it in the matter database's consent_requests "
        "table with status 'drafted'."
    )
    assert run.exit_code == 0, run.stderr
    letter = (run.world / "drafts/orion-consent-request.md").read_text(encoding="utf-8")
    assert "250 West 34th Street" in letter and "clause 10.2" in letter
    connection = sqlite3.connect(run.world / "db/matter.sqlite")
    rows = connection.execute(
        "SELECT contract_id, status, letter_path FROM consent_requests WHERE status = 'drafted'"
    ).fetchall()
    connection.close()
    assert rows == [(4, "drafted", "drafts/orion-consent-request.md")]
    assert run.steps_of("write_file") and run.steps_of("sql_insert")


def test_a_bad_config_fails_loudly_but_still_reports_usage(legal) -> None:
    run = legal(CAP, config={"top_k": "0"})
    assert run.exit_code == 1
    assert "top_k" in run.stderr
    assert run.usage == {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}


class _FakeChat(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeChat.requests.append(
            {"path": self.path, "auth": self.headers["Authorization"], **body}
        )
        reply = {
            "choices": [{"message": {"role": "assistant", "content": "POLISHED ANSWER"}}],
            "usage": {"prompt_tokens": 1234, "completion_tokens": 56},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_openai() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _FakeChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeChat.requests.clear()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_offline_it_never_calls_a_model(legal) -> None:
    run = legal(CAP)
    assert not run.steps_of("llm") and not run.steps_of("llm_error")


def test_with_an_openai_compatible_endpoint_it_polishes_the_answer(legal, fake_openai) -> None:
    env = {"OPENAI_BASE_URL": fake_openai, "OPENAI_API_KEY": "sk-test"}
    offline = legal(CAP)
    online = legal(CAP, env=env, config={"model": "gpt-4o"})
    assert online.answer == "POLISHED ANSWER"
    (request,) = _FakeChat.requests
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert request["model"] == "gpt-4o" and "€2,500,000" in request["messages"][1]["content"]
    assert online.usage["input_tokens"] == offline.usage["input_tokens"] + 1234
    switched_off = legal(CAP, env=env, config={"llm": "off"})
    assert len(_FakeChat.requests) == 1 and "€2,500,000" in switched_off.answer
