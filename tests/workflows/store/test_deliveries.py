"""Webhook deliveries: recorded once, so a redelivered webhook is handled once."""

from __future__ import annotations

import pytest

from workflows.store import Store, StoreError


def test_a_delivery_is_new_only_the_first_time(store: Store) -> None:
    assert store.record_delivery("72d3162e-cc78-11e3-81ab-4c9367dc0958", "issue_comment") is True
    assert store.record_delivery("72d3162e-cc78-11e3-81ab-4c9367dc0958", "issue_comment") is False
    assert store.record_delivery("72d3162e-cc78-11e3-81ab-4c9367dc0959", "pull_request") is True


def test_a_delivery_needs_an_id(store: Store) -> None:
    with pytest.raises(StoreError, match="non-empty delivery id"):
        store.record_delivery("", "issue_comment")
