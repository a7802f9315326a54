"""The data converter shares its pydantic TypeAdapters across converter instances (the workflow
sandbox builds one converter per workflow instance) and round-trips our payload types."""

from __future__ import annotations

import pickle

from workflows.catalog.models import CellRef
from workflows.engine import converter
from workflows.engine.types import RunSummary


def summary() -> RunSummary:
    return RunSummary(run_id="e/c/a/0", status="scored", score=0.5, cost_usd=0.25)


def test_every_converter_instance_reuses_one_schema_per_type() -> None:
    payload = converter.PayloadConverter().to_payloads([summary()])
    converter._type_adapter.cache_clear()
    for instance in (converter.PayloadConverter(), converter.PayloadConverter()):
        assert instance.from_payloads(payload, [RunSummary]) == [summary()]
    info = converter._type_adapter.cache_info()
    assert (info.misses, info.hits) == (1, 1)


def test_an_unpickled_converter_keeps_the_shared_cache() -> None:
    copy = pickle.loads(pickle.dumps(converter.SharedCacheJSONConverter()))
    assert copy._type_adapter is converter._type_adapter


def test_pydantic_models_and_dataclasses_round_trip() -> None:
    cell = CellRef(experiment_id="e", case_id="c", arm="a", trial=1, seed=7)
    instance = converter.PayloadConverter()
    payloads = instance.to_payloads([cell, summary()])
    assert instance.from_payloads(payloads, [CellRef, RunSummary]) == [cell, summary()]
