"""What went wrong, from a chain of Temporal failures: the innermost message, without the chain of
wrappers or the failure's type ("BuildFailed: …"). Used by workflow code (deterministic: no I/O)
and by the client alike."""

from __future__ import annotations

from temporalio.exceptions import FailureError

MESSAGE_LIMIT = 500


def reason_of(error: BaseException, limit: int = MESSAGE_LIMIT) -> str:
    while error.__cause__ is not None:
        error = error.__cause__
    text = error.message if isinstance(error, FailureError) else str(error)
    return text[:limit]
