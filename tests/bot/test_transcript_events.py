"""Transcript lines as timeline rows (bot/dashboard/transcript_events.py): the recognised shapes
(docs/architecture.md, "Transcript events"), and bad lines kept as text, never a crash."""

from __future__ import annotations

import json

from bot.dashboard.transcript_events import TEXT_LIMIT, EventView, event_view


def view(value: object, t0: float | None = None, number: int = 7) -> EventView:
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    return event_view(number, 100, data, size=len(data), t0=t0)


def test_openai_chat_message_with_tool_calls_and_tool_result() -> None:
    call = {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "grep", "arguments": '{"pattern": "lease"}'}}
        ],
    }  # fmt: skip
    row = view(call)
    assert (row.kind, row.role) == ("message", "assistant")
    assert [p.kind for p in row.parts] == ["text", "tool_call"]
    assert row.parts[1].title == "grep (c1)" and '"pattern": "lease"' in row.parts[1].text
    assert "tool_call" in row.kinds.split()
    result = view({"role": "tool", "tool_call_id": "c1", "content": "3 matches"})
    assert result.kind == "tool_result" and result.parts[0].text == "3 matches"
    assert result.parts[0].title == "result of c1"


def test_anthropic_content_blocks_and_an_error_result() -> None:
    row = view({
        "role": "user",
        "content": [
            {"type": "text", "text": "Here:"},
            {"type": "tool_use", "id": "tu1", "name": "read", "input": {"path": "a.md"}},
            {"type": "tool_result", "tool_use_id": "tu1", "is_error": True,
             "content": [{"type": "text", "text": "no such file"}]},
        ],
    })  # fmt: skip
    assert [p.kind for p in row.parts] == ["text", "tool_call", "tool_result"]
    assert row.parts[1].title == "read (tu1)" and '"path": "a.md"' in row.parts[1].text
    assert row.parts[2].is_error and row.parts[2].text == "no such file"
    assert {"message", "user", "tool_call", "tool_result", "error"} <= set(row.kinds.split())
    nested = view({"type": "assistant", "message": {"role": "assistant", "content": "hi"}})
    assert nested.kind == "message" and nested.parts[0].text == "hi"


def test_errors_search_hits_and_generic_events_with_time_offsets() -> None:
    error = view({"step": 4, "ms": 1500, "type": "error", "error": "boom", "traceback": "tb"})
    assert (error.kind, error.step, error.seconds) == ("error", "4", 1.5)
    assert error.parts[0].is_error and error.parts[0].text == "boom\ntb"
    hits = view({"type": "search", "query": "lease", "hits": [
        {"title": "Lease A", "path": "docs/a.md", "snippet": "the lease ends", "score": 0.91},
        "plain hit",
    ]})  # fmt: skip
    assert hits.kind == "search" and hits.parts[0].title == "2 hits for 'lease'"
    assert hits.parts[0].hits[0] == {
        "title": "Lease A", "where": "docs/a.md", "snippet": "the lease ends", "score": "0.91"
    }  # fmt: skip
    read = view({"timestamp": "2026-01-01T00:00:03Z", "type": "read", "path": "a.md"},
                t0=view({"timestamp": "2026-01-01T00:00:00Z"}).seconds or 1767225600.0)  # fmt: skip
    assert (read.kind, read.label, read.seconds) == ("event", "read", 3.0)
    assert read.parts[0].text == "path=a.md"
    assert read.raw.startswith("{") and read.step == "7"  # no step field: the line number


def test_bad_lines_are_kept_as_text_with_a_note() -> None:
    broken = view(b'{"role": "assistant", "content": "cut')
    assert broken.kind == "invalid" and broken.parts[0].text.startswith('{"role"')
    assert any(n.startswith("not JSON") for n in broken.notes)
    array = view([1, 2])
    assert array.kind == "invalid" and "a JSON list, not an object" in array.notes
    odd = view({"role": "assistant", "content": 5, "tool_calls": 5})  # odd types: no crash
    assert odd.kind == "message" and odd.parts == []
    head = b'{"type": "log", "text": "' + b"x" * 1000
    long = event_view(1, 0, head, size=10_000_000, t0=None)
    assert (
        long.kind == "invalid" and "line is 10,000,000 bytes; showing the first 1,025" in long.notes
    )
    big = view({"role": "assistant", "content": "y" * (TEXT_LIMIT + 10)})
    assert len(big.parts[0].text) == TEXT_LIMIT and any("cut at" in n for n in big.notes)
