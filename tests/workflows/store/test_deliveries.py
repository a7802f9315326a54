"""Webhook deliveries: claimed once across processes, released after a failure, taken over once
a dead claimer's lease expires, so a redelivered webhook is handled exactly once."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from workflows.store import Store, StoreError


def test_a_delivery_is_new_only_the_first_time(store: Store) -> None:
    assert store.record_delivery("72d3162e-cc78-11e3-81ab-4c9367dc0958", "issue_comment") is True
    assert store.record_delivery("72d3162e-cc78-11e3-81ab-4c9367dc0958", "issue_comment") is False
    assert store.record_delivery("72d3162e-cc78-11e3-81ab-4c9367dc0959", "pull_request") is True


def test_a_delivery_needs_an_id(store: Store) -> None:
    with pytest.raises(StoreError, match="non-empty delivery id"):
        store.record_delivery("", "issue_comment")


def test_a_claimed_delivery_is_not_claimed_again_until_released(store: Store) -> None:
    assert store.claim_delivery("d-1", "issue_comment", lease_s=60) is True
    assert store.claim_delivery("d-1", "issue_comment", lease_s=60) is False  # being handled
    store.release_delivery("d-1")  # its handling failed
    assert store.claim_delivery("d-1", "issue_comment", lease_s=60) is True  # the redelivery
    assert store.claim_delivery("d-1", "issue_comment", lease_s=60) is False


def test_a_handled_delivery_stays_a_duplicate(store: Store) -> None:
    assert store.claim_delivery("d-2", "issue_comment", lease_s=0.001) is True
    store.finish_delivery("d-2")
    time.sleep(0.01)  # past the claim's lease: a handled delivery has none left
    assert store.claim_delivery("d-2", "issue_comment", lease_s=60) is False
    store.release_delivery("d-2")  # a late release does not undo the handling
    assert store.claim_delivery("d-2", "issue_comment", lease_s=60) is False


def test_an_expired_claim_can_be_taken_over(store: Store) -> None:
    """The process that claimed it died mid-handling: once its lease is over, a redelivery runs."""
    assert store.claim_delivery("d-3", "issue_comment", lease_s=0.05) is True
    assert store.claim_delivery("d-3", "issue_comment", lease_s=60) is False
    time.sleep(0.1)
    assert store.claim_delivery("d-3", "issue_comment", lease_s=60) is True
    assert store.claim_delivery("d-3", "issue_comment", lease_s=60) is False


def test_a_recorded_delivery_is_handled_for_claims(store: Store) -> None:
    assert store.record_delivery("d-4", "pull_request") is True  # `evalbot github-event`
    assert store.claim_delivery("d-4", "pull_request", lease_s=60) is False
    assert store.claim_delivery("d-5", "pull_request", lease_s=60) is True
    assert store.record_delivery("d-5", "pull_request") is False


def test_concurrent_claims_from_many_connections_have_one_winner(store_url: str) -> None:
    stores = [Store(store_url) for _ in range(6)]
    stores[0].migrate()
    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            claims = list(
                pool.map(lambda s: s.claim_delivery("d-6", "issue_comment", lease_s=60), stores)
            )
    finally:
        for each in stores:
            each.close()
    assert sorted(claims) == [False] * 5 + [True]


def test_a_claim_needs_an_id(store: Store) -> None:
    with pytest.raises(StoreError, match="non-empty delivery id"):
        store.claim_delivery("", "issue_comment", lease_s=60)
