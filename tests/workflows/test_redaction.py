"""The Redactor scrubs known secret values from strings, bytes, JSON records, exceptions, log
records and streams — including values split across chunk boundaries and overlapping values."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import logging
import stat
from collections.abc import AsyncIterator
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from workflows.redaction import PLACEHOLDER, RedactedError, Redactor
from workflows.secret_store import LocalSecretStore
from workflows.settings import Settings

KEY = "sk-live-4f9a8b7c6d5e"
TOKEN = "ghp_abcdefghijklmnop"
SHORT = "abc12"  # below the minimum length: never scrubbed


def test_values_are_replaced_wherever_they_appear() -> None:
    redactor = Redactor([KEY, TOKEN])

    text = f"key={KEY}; again {KEY}{TOKEN}."

    assert redactor.redact(text) == f"key={PLACEHOLDER}; again {PLACEHOLDER}{PLACEHOLDER}."


def test_values_shorter_than_the_minimum_are_ignored() -> None:
    redactor = Redactor([SHORT, KEY])

    assert redactor.redact(f"{SHORT} {KEY}") == f"{SHORT} {PLACEHOLDER}"
    assert redactor.count == 1


def test_overlapping_values_leave_no_fragment_of_either() -> None:
    redactor = Redactor(["abcdef123", "123xyz789"])

    assert redactor.redact("<abcdef123xyz789>") == f"<{PLACEHOLDER}>"


def test_json_escaped_forms_are_scrubbed() -> None:
    value = 'pa"ss\\word-42'
    redactor = Redactor([value])

    encoded = json.dumps({"answer": f"the key is {value}"})

    assert value not in redactor.redact(encoded)
    assert json.dumps(value)[1:-1] not in redactor.redact(encoded)
    assert json.loads(redactor.redact(encoded)) == {"answer": f"the key is {PLACEHOLDER}"}


def test_non_ascii_values_and_text_survive_round_trips() -> None:
    redactor = Redactor(["clé-secrète-ü"])

    assert redactor.redact("Δ → clé-secrète-ü ←") == f"Δ → {PLACEHOLDER} ←"


def test_json_like_records_are_scrubbed_deeply() -> None:
    redactor = Redactor([KEY])
    record = {"error": f"bad {KEY}", "items": [KEY, 3, None], KEY: ("x", KEY)}

    assert redactor.redact_json(record) == {
        "error": f"bad {PLACEHOLDER}",
        "items": [PLACEHOLDER, 3, None],
        PLACEHOLDER: ("x", PLACEHOLDER),
    }


def test_exceptions_are_replaced_by_a_scrubbed_stand_in_with_the_chain() -> None:
    redactor = Redactor([KEY, TOKEN])
    try:
        try:
            raise KeyError(TOKEN)
        except KeyError as cause:
            raise ValueError(f"login failed with {KEY}") from cause
    except ValueError as error:
        safe = redactor.redact_exception(error)

    assert isinstance(safe, RedactedError)
    assert str(safe) == f"ValueError: login failed with {PLACEHOLDER}"
    assert safe.original_type == "ValueError"
    assert "KeyError" in safe.detail
    assert KEY not in safe.detail and TOKEN not in safe.detail


def test_the_logging_filter_scrubs_messages_arguments_and_tracebacks() -> None:
    redactor = Redactor([KEY])
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(redactor.logging_filter())
    logger = logging.getLogger("test.redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("using %s for %s", KEY, "openai")
        try:
            raise RuntimeError(f"boom {KEY}")
        except RuntimeError:
            logger.exception("failed: %r", {"key": KEY})
        logger.error("stack", stack_info=True, extra={})
    finally:
        logger.removeHandler(handler)

    output = stream.getvalue()
    assert KEY not in output
    assert f"using {PLACEHOLDER} for openai" in output
    assert f"RuntimeError: boom {PLACEHOLDER}" in output


def test_an_empty_redactor_changes_nothing() -> None:
    redactor = Redactor([])

    assert not redactor
    assert redactor.redact("anything at all") == "anything at all"
    assert b"".join(redactor.redact_chunks([b"a", b"b"])) == b"ab"


def test_from_settings_loads_the_local_store_and_secret_settings(tmp_path: object) -> None:
    settings = Settings(data_dir=tmp_path, secrets={"vault_token": "hvs.service-token-1"})
    LocalSecretStore.from_settings(settings).replace({"llm-keys": {"OPENAI_API_KEY": KEY}})

    redactor = Redactor.from_settings(settings)

    assert redactor.redact(f"{KEY} hvs.service-token-1") == f"{PLACEHOLDER} {PLACEHOLDER}"


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


SECRETS = ["abcdef123", "123xyz789", "zzzzzzzz", "k" * 30]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(st.sampled_from(SECRETS), st.text("abcz123kxy789 ", max_size=12)), max_size=12
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_streams_scrub_values_split_across_chunks_exactly_like_whole_text(
    pieces: list[str], cuts: list[int]
) -> None:
    redactor = Redactor(SECRETS)
    data = "".join(pieces).encode()

    streamed = b"".join(redactor.redact_chunks(chunked(data, cuts)))

    assert streamed == redactor.redact_bytes(data)
    for value in SECRETS:
        assert value.encode() not in streamed


def test_a_value_split_one_byte_at_a_time_is_caught() -> None:
    redactor = Redactor([KEY])
    data = f"start {KEY} end".encode()

    streamed = b"".join(redactor.redact_chunks([bytes([b]) for b in data]))

    assert streamed == f"start {PLACEHOLDER} end".encode()


def test_async_streams_are_scrubbed() -> None:
    redactor = Redactor([KEY])

    async def source() -> AsyncIterator[bytes]:
        for part in (b"xx sk-live-4f9", b"a8b7c6d5e yy"):
            yield part

    async def collect() -> bytes:
        return b"".join([c async for c in redactor.aredact_chunks(source())])

    assert asyncio.run(collect()) == f"xx {PLACEHOLDER} yy".encode()


def test_overlapping_values_split_at_every_point_leave_no_fragment() -> None:
    redactor = Redactor(["abcdef123", "123xyz789"])
    data = b"<abcdef123xyz789>"

    for first in range(len(data) + 1):
        for second in range(first, len(data) + 1):
            parts = [data[:first], data[first:second], data[second:]]
            streamed = b"".join(redactor.redact_chunks(parts))
            assert streamed == b"<" + PLACEHOLDER.encode() + b">", (first, second)


def test_a_tree_is_scrubbed_in_place_and_clean_files_are_left_alone(tmp_path: Path) -> None:
    redactor = Redactor([KEY])
    (tmp_path / "out" / "deep").mkdir(parents=True)
    leaky = tmp_path / "out" / "deep" / "transcript.jsonl"
    leaky.write_bytes(b"x" * 70_000 + KEY.encode() + b"\n")  # the value straddles a 64 KiB read
    leaky.chmod(0o640)
    clean = tmp_path / "out" / "answer.md"
    clean.write_text("nothing to hide")
    clean_inode = clean.stat().st_ino
    outside = tmp_path / "outside.txt"
    outside.write_text(KEY)
    (tmp_path / "out" / "link").symlink_to(outside)

    scrubbed = redactor.redact_tree(tmp_path / "out")

    assert scrubbed == [leaky]
    assert leaky.read_bytes() == b"x" * 70_000 + PLACEHOLDER.encode() + b"\n"
    assert stat.S_IMODE(leaky.stat().st_mode) == 0o640
    assert clean.stat().st_ino == clean_inode
    assert outside.read_text() == KEY  # symlinks are not followed
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == [
        "answer.md",
        "deep",
        "link",
        "transcript.jsonl",
    ]
