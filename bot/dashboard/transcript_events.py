"""One transcript line as the timeline shows it (docs/architecture.md, "Transcript events").

`event_view` turns a line of `transcript.jsonl` into an `EventView`: its step, time offset, type and
the parts a person reads — messages with their role (plain, OpenAI chat `{role, content,
tool_calls}` and Anthropic `{role, content: [{type: text|tool_use|tool_result}]}`), tool calls with
their arguments and results, search hits and errors. Anything else keeps its type and is shown as
folded JSON. A line that is not a JSON object is kept as text. Every text is cut at a limit with a
note; escaping is left to the template (jinja2 autoescape), so nothing in a line is ever executed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

TEXT_LIMIT = 8 * 1024
RAW_LIMIT = 32 * 1024
HIT_LIMIT = 20
ERROR_TYPES = ("error", "exception", "failure")
SEARCH_KEYS = ("hits", "results", "documents", "matches")
TIME_OFFSET_KEYS = (("ms", 0.001), ("elapsed_ms", 0.001), ("elapsed_s", 1.0), ("t", 1.0))
TIMESTAMP_KEYS = ("timestamp", "ts", "time", "created_at")


@dataclass
class Part:
    """A piece of an event: `kind` text | tool_call | tool_result | hits | error."""

    kind: str
    text: str = ""
    title: str = ""
    hits: list[dict[str, str]] = field(default_factory=list)
    is_error: bool = False
    note: str = ""  # set when the text was cut

    def __post_init__(self) -> None:
        self.text, cut = clip(self.text)
        self.note = self.note or cut


@dataclass
class EventView:
    number: int  # line number in the file, from 1
    offset: int  # byte offset of the line (anchors, "continue from here")
    kind: str  # message | tool_call | tool_result | search | error | event | invalid
    label: str  # the event's own type, or its role for a message
    step: str = ""
    seconds: float | None = None  # since the transcript's first event
    role: str = ""
    parts: list[Part] = field(default_factory=list)
    raw: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def kinds(self) -> str:
        """What the row contains, for the type filter (space separated)."""
        found = {self.kind, self.label} | {_PART_KIND.get(p.kind, p.kind) for p in self.parts}
        if any(p.is_error for p in self.parts):
            found.add("error")
        return " ".join(sorted(k for k in found if k))


_PART_KIND = {"hits": "search", "text": "message"}


def clip(text: str, limit: int = TEXT_LIMIT) -> tuple[str, str]:
    """`text` cut at `limit` characters, and a note when it was cut (else "")."""
    if len(text) <= limit:
        return text, ""
    return text[:limit], f"cut at {limit:,} of {len(text):,} characters"


def parse(data: bytes) -> tuple[Any, str]:
    """The line's JSON value, or (None, why it is not JSON)."""
    try:
        return json.loads(data), ""
    except (ValueError, RecursionError) as error:
        return None, f"not JSON ({str(error)[:80]})"


def event_view(
    number: int, offset: int, data: bytes, *, size: int, t0: float | None = None
) -> EventView:
    """The line `data` (the first bytes of a line of `size` bytes) as a timeline row."""
    notes = [f"line is {size:,} bytes; showing the first {len(data):,}"] if size > len(data) else []
    value, problem = parse(data)
    if not isinstance(value, dict):
        text, cut = clip(data.decode("utf-8", errors="replace"))
        why = problem or f"a JSON {type(value).__name__}, not an object"
        return EventView(
            number,
            offset,
            "invalid",
            "invalid",
            step=str(number),
            parts=[Part("text", text)],
            notes=[n for n in (*notes, why, cut) if n],
        )
    view = _known(value) or _generic(value)
    view.number, view.offset = number, offset
    view.step = str(value.get("step", number))[:20]
    view.seconds = seconds_of(value, t0)
    cut = ""
    if view.kind == "event":  # an unknown shape: its JSON, folded (known ones are shown as such)
        view.raw, cut = clip(
            json.dumps(value, indent=2, ensure_ascii=False, default=str), RAW_LIMIT
        )
    parts_cut = [f"{p.kind} {p.title}: {p.note}".replace("  ", " ") for p in view.parts if p.note]
    view.notes = [n for n in (*notes, *view.notes, *parts_cut, cut) if n]
    return view


def seconds_of(value: dict[str, Any], t0: float | None) -> float | None:
    """Seconds since the start: an offset field (`ms`, `elapsed_s`, `t`) or a timestamp - t0."""
    for key, scale in TIME_OFFSET_KEYS:
        if isinstance(value.get(key), int | float) and not isinstance(value.get(key), bool):
            return float(value[key]) * scale
    stamp = timestamp_of(value)
    return stamp - t0 if stamp is not None and t0 is not None else None


def timestamp_of(value: Any) -> float | None:
    """An absolute time in the event (epoch seconds or ms, or ISO 8601), as epoch seconds."""
    if not isinstance(value, dict):
        return None
    for key in TIMESTAMP_KEYS:
        stamp = value.get(key)
        if isinstance(stamp, int | float) and not isinstance(stamp, bool):
            return stamp / 1000 if stamp > 1e11 else float(stamp)
        if isinstance(stamp, str):
            try:
                return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


# -- recognised shapes ---------------------------------------------------------------------------


def _known(value: dict[str, Any]) -> EventView | None:
    message = value.get("message")
    if isinstance(message, dict) and "role" in message:  # {"type": ..., "message": {role, ...}}
        return _message(message)
    if isinstance(value.get("role"), str):
        return _message(value)
    kind = str(value.get("type") or value.get("event") or value.get("kind") or "")
    if _is_error(kind, value):
        return _error(kind, value)
    if kind in ("tool_result", "function_call_output", "tool_output"):
        return EventView(0, 0, "tool_result", kind, parts=[_tool_result(value)])
    if (
        kind in ("tool_call", "tool_use", "function_call")
        or "tool" in value
        or "tool_name" in value
    ):
        return EventView(0, 0, "tool_call", kind or "tool_call", parts=_tool_parts(value))
    if "search" in kind or any(isinstance(value.get(k), list) for k in SEARCH_KEYS):
        return _search(kind, value)
    return None


def _generic(value: dict[str, Any]) -> EventView:
    kind = str(value.get("type") or value.get("event") or value.get("kind") or "event")[:60]
    skip = {"type", "event", "kind", "step", *(k for k, _ in TIME_OFFSET_KEYS), *TIMESTAMP_KEYS}
    summary = ", ".join(
        f"{k}={_scalar(v)}" for k, v in value.items() if k not in skip and _scalar(v) is not None
    )
    text, cut = clip(summary, 400)
    parts = [Part("text", text)] if text else []
    return EventView(0, 0, "event", kind, parts=parts, notes=[cut] if cut else [])


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool | int | float) or value is None:
        return json.dumps(value)
    if isinstance(value, str):
        return value if len(value) <= 80 else value[:80] + "…"
    return None


def _message(message: dict[str, Any]) -> EventView:
    role = str(message.get("role"))[:40]
    parts = _content_parts(message.get("content"))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:  # OpenAI chat
        if isinstance(call, dict):
            inner = call.get("function")
            function: dict[str, Any] = inner if isinstance(inner, dict) else call
            parts.append(_call(function.get("name"), function.get("arguments"), call.get("id")))
    if isinstance(message.get("function_call"), dict):  # OpenAI chat, legacy
        legacy = message["function_call"]
        parts.append(_call(legacy.get("name"), legacy.get("arguments"), None))
    if role == "tool":  # OpenAI chat: a tool's result
        text = "\n".join(p.text for p in parts)
        title = f"result of {message.get('name') or message.get('tool_call_id') or 'a tool'}"
        return EventView(
            0, 0, "tool_result", "tool", role=role, parts=[Part("tool_result", text, title)]
        )
    return EventView(0, 0, "message", role, role=role, parts=parts)


def _content_parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Part("text", content)] if content else []
    parts: list[Part] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, str):
            parts.append(Part("text", block))
        elif isinstance(block, dict):
            parts.append(_block(block))
    return parts


def _block(block: dict[str, Any]) -> Part:
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text") and isinstance(block.get("text"), str):
        return Part("text", block["text"])
    if kind == "tool_use":  # Anthropic
        return _call(block.get("name"), block.get("input"), block.get("id"))
    if kind == "tool_result":  # Anthropic
        return _tool_result(block)
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return Part("text", block["thinking"], title="thinking")
    return Part("text", f"[{str(kind)[:40]} block]")


def _call(name: Any, arguments: Any, call_id: Any) -> Part:
    if isinstance(arguments, str):  # OpenAI: a JSON string
        parsed, problem = parse(arguments.encode())
        arguments = parsed if not problem else arguments
    text = arguments if isinstance(arguments, str) else _pretty(arguments)
    title = f"{str(name or 'tool')[:80]}" + (f" ({str(call_id)[:60]})" if call_id else "")
    return Part("tool_call", text, title)


def _tool_result(value: dict[str, Any]) -> Part:
    content = next(
        (value[k] for k in ("content", "output", "result") if value.get(k) is not None), ""
    )
    if isinstance(content, list):
        text = "\n".join(p.text for p in _content_parts(content))
    else:
        text = content if isinstance(content, str) else _pretty(content)
    target = value.get("tool_use_id") or value.get("call_id") or value.get("name") or "a tool"
    error = bool(value.get("is_error")) or bool(value.get("error"))
    return Part("tool_result", text, f"result of {str(target)[:80]}", is_error=error)


def _tool_parts(value: dict[str, Any]) -> list[Part]:
    name = value.get("tool") or value.get("tool_name") or value.get("name")
    arguments = next(
        (value[k] for k in ("arguments", "args", "input", "params") if k in value), None
    )
    parts = [_call(name, arguments, value.get("id") or value.get("call_id"))]
    if any(value.get(k) is not None for k in ("result", "output")):
        parts.append(_tool_result({**value, "content": None}))
    return parts


def _is_error(kind: str, value: dict[str, Any]) -> bool:
    return any(word in kind.lower() for word in ERROR_TYPES) or (
        "error" in value and value["error"] not in (None, "", False)
    )


def _error(kind: str, value: dict[str, Any]) -> EventView:
    detail = value.get("error") or value.get("message") or value.get("detail") or ""
    text = detail if isinstance(detail, str) else _pretty(detail)
    if isinstance(value.get("traceback"), str):
        text = f"{text}\n{value['traceback']}"
    return EventView(0, 0, "error", kind or "error", parts=[Part("error", text, is_error=True)])


def _search(kind: str, value: dict[str, Any]) -> EventView:
    query = value.get("query") or value.get("q") or ""
    hits_value: list[Any] = next(
        (value[k] for k in SEARCH_KEYS if isinstance(value.get(k), list)), []
    )
    hits = [_hit(h) for h in hits_value[:HIT_LIMIT]]
    title = (
        f"{len(hits_value)} hits for {str(query)[:200]!r}" if query else f"{len(hits_value)} hits"
    )
    return EventView(0, 0, "search", kind or "search", parts=[Part("hits", title=title, hits=hits)])


def _hit(hit: Any) -> dict[str, str]:
    if not isinstance(hit, dict):
        return {"title": clip(str(hit), 300)[0], "where": "", "snippet": ""}
    title = hit.get("title") or hit.get("name") or hit.get("id") or ""
    where = hit.get("url") or hit.get("path") or hit.get("source") or ""
    snippet = hit.get("snippet") or hit.get("text") or hit.get("content") or ""
    score = hit.get("score")
    return {
        "title": clip(str(title), 300)[0],
        "where": clip(str(where), 300)[0],
        "snippet": clip(str(snippet), 600)[0],
        "score": f"{score:.3g}" if isinstance(score, int | float) else "",
    }


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
