"""`evalbot worker` with EVALBOT_METRICS_WORKER_ADDRESS and EVALBOT_METRICS_TEMPORAL_ADDRESS
(embedded dev server, a temp data dir): its own metrics, the backlog of its real task queues, and
the Temporal SDK's exporter answer while it runs, and stop with it. A taken address is one
sentence naming the setting."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from bot import composition
from bot.metrics_server import MetricsAddressError, serving
from tests.bot.test_stopping import START_TIMEOUT_S, STOP_TIMEOUT_S, Command, start, wait_ready
from workflows.ports import free_port


def scrape_until(url: str, wanted: str, deadline_s: float = 60) -> str:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            text = httpx.get(url, timeout=2).text
            if wanted in text:
                return text
        except httpx.HTTPError:
            text = ""
        assert time.monotonic() < deadline, f"{wanted} never appeared at {url}:\n{text}"
        time.sleep(0.3)


@pytest.mark.timeout(START_TIMEOUT_S + STOP_TIMEOUT_S + 60)
def test_the_worker_serves_its_metrics_and_the_sdk_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, sdk = free_port(), free_port()
    monkeypatch.setenv("EVALBOT_METRICS_WORKER_ADDRESS", f"127.0.0.1:{ours}")
    monkeypatch.setenv("EVALBOT_METRICS_TEMPORAL_ADDRESS", f"127.0.0.1:{sdk}")
    monkeypatch.setenv("EVALBOT_METRICS_QUEUE_DEPTH_INTERVAL_S", "0.5")
    log = tmp_path / "worker.log"
    command = Command(["worker"], "evalbot worker: serving")
    process = start(command, tmp_path / "state", log, keep=("EVALBOT_METRICS_",))
    try:
        wait_ready(process, command, log, 0)
        text = scrape_until(f"http://127.0.0.1:{ours}/metrics", 'task_queue="evalbot-runs"')
        assert 'evalbot_stage_duration_seconds_count{outcome="ok",stage="provision"} 0.0' in text
        assert "temporal_num_pollers" in scrape_until(
            f"http://127.0.0.1:{sdk}/metrics", "temporal_num_pollers"
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=STOP_TIMEOUT_S) == 0, log.read_text()
        with pytest.raises(httpx.ConnectError):  # the listener stopped with the worker
            httpx.get(f"http://127.0.0.1:{ours}/metrics", timeout=2)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_taken_metrics_address_is_one_sentence_naming_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        registry = CollectorRegistry()
        with (
            pytest.raises(MetricsAddressError) as raised,
            serving(address, registry, "EVALBOT_METRICS_WORKER_ADDRESS"),
        ):
            pass
    message = str(raised.value)
    assert address in message
    assert "set EVALBOT_METRICS_WORKER_ADDRESS to a free host:port" in message


def test_a_taken_temporal_metrics_address_is_one_sentence_too() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(MetricsAddressError, match="EVALBOT_METRICS_TEMPORAL_ADDRESS") as raised:
            composition.temporal_runtime(address)
    assert address in str(raised.value) and "in use" in str(raised.value)
