from __future__ import annotations

from bot.webhooks.signature import sign, verify

# GitHub's documented test vector (docs: "Validating webhook deliveries").
SECRET = b"It's a Secret to Everybody"
BODY = b"Hello, World!"
HEADER = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_matches_githubs_test_vector() -> None:
    assert sign(SECRET, BODY) == HEADER
    assert verify(SECRET, BODY, HEADER)


def test_rejects_wrong_missing_and_malformed_signatures() -> None:
    assert not verify(SECRET, BODY + b" ", HEADER)
    assert not verify(b"another secret", BODY, HEADER)
    assert not verify(SECRET, BODY, None)
    assert not verify(SECRET, BODY, "")
    assert not verify(SECRET, BODY, HEADER.removeprefix("sha256="))
    assert not verify(SECRET, BODY, HEADER.replace("sha256=", "sha1="))
    assert not verify(SECRET, BODY, HEADER[:-1] + "f")
    assert not verify(SECRET, BODY, "sha256=ünïcode")
