"""Temporal's data converter for evalbot: pydantic JSON, with one TypeAdapter cache per process.

The workflow sandbox builds a fresh payload converter for every workflow instance, and the stock
pydantic converter caches its TypeAdapters per converter instance: every RunWorkflow rebuilt the
pydantic schemas of its five payload types, a seventh of the worker's time in the orchestration
benchmark. Here the cache lives in this module, which the sandbox passes through (worker.py), so
each type's schema is built once per process.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import TypeAdapter
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
)


@functools.lru_cache(maxsize=1024)
def _type_adapter(type_hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(type_hint)


class SharedCacheJSONConverter(PydanticJSONPlainPayloadConverter):
    def __init__(self) -> None:
        super().__init__()
        self._type_adapter = _type_adapter

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._type_adapter = _type_adapter


@functools.cache
def _converters() -> tuple[EncodingPayloadConverter, ...]:
    """One set per process: they hold no state, and the SDK builds a PayloadConverter for every
    activation and activity (DataConverter.__post_init__): ~1 ms a cell when each built its own."""
    return tuple(
        SharedCacheJSONConverter() if isinstance(c, JSONPlainPayloadConverter) else c
        for c in DefaultPayloadConverter.default_encoding_payload_converters
    )


class PayloadConverter(CompositePayloadConverter):
    """Temporal's default converters, with pydantic JSON (shared cache) in place of plain JSON."""

    def __init__(self) -> None:
        super().__init__(*_converters())


data_converter = DataConverter(payload_converter_class=PayloadConverter)
