"""The S3-API blob store (AWS S3, GCS's S3 API, R2, MinIO…) through `obstore`.

Objects are `<prefix>/<key>/<name>`. Uploads stream each staged file from disk in parts
(multipart above PART_BYTES, at most PART_CONCURRENCY parts in flight: the worker holds about
PART_BYTES × PART_CONCURRENCY whatever the file's size); reads are ranged (`read_range`) or
streamed. Credentials come from the standard AWS variables (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, web identity, instance metadata) and are never logged.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import obstore
from obstore.exceptions import BaseError, NotFoundError
from obstore.store import S3Store

from workflows.blobs.base import BlobStoreError, safe_key, safe_name
from workflows.blobs.staging import fresh_staging, reap_staging, scratch_folder

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config

PART_BYTES = 5 << 20  # the S3 minimum part size; 2 GiB of /out is ~410 parts (max 10,000)
PART_CONCURRENCY = 2
READ_CHUNK = 1 << 20
CHECK_OBJECT = ".evalbot-check"
# A refusal of the credentials: S3's error codes, or the HTTP status as the client words it. Never a
# bare "403": the endpoint's own URL is in the message, and its port may contain those digits.
REFUSED = re.compile(
    r"InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied"
    r"|\b403 Forbidden\b|status(?: code)?: ?403\b"
)
# obstore raises its own errors and builtin ones (FileNotFoundError, PermissionError, …)
CLIENT_ERRORS = (BaseError, OSError, RuntimeError, ValueError)
CREDENTIAL_SOURCES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


def _client_options(endpoint: str | None, timeout_s: float) -> ClientConfig:
    options: ClientConfig = {"timeout": timedelta(seconds=timeout_s)}
    options["connect_timeout"] = timedelta(seconds=min(timeout_s, 10))
    if endpoint and endpoint.startswith("http://"):
        options["allow_http"] = True
    return options


class S3BlobStore:
    def __init__(
        self,
        bucket: str,
        prefix: str,
        *,
        scratch: Path,
        endpoint: str | None = None,
        region: str | None = None,
    ) -> None:
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.scratch = scratch
        self.endpoint, self.region = endpoint, region
        self._store = self._open(timeout_s=300, retries=5)

    def _open(self, *, timeout_s: float, retries: int) -> S3Store:
        config: S3Config = {}
        if self.endpoint:
            config["endpoint"] = self.endpoint
        if self.region:
            config["region"] = self.region
        missing = _missing_credential()
        if missing:
            raise BlobStoreError(f"the blob store {self.url} cannot be used: {missing}")
        try:
            return S3Store(
                self.bucket,
                prefix=self.prefix or None,
                config=config,
                client_options=_client_options(self.endpoint, timeout_s),
                retry_config={
                    "max_retries": retries,
                    "retry_timeout": timedelta(seconds=timeout_s),
                },
            )
        except CLIENT_ERRORS as error:
            raise BlobStoreError(
                f"the blob store {self.url} cannot be used: {self._reason(error)}"
            ) from None

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    # -- the start check ------------------------------------------------------------------------

    def check(self) -> None:
        """Write, read and delete one small object, quickly: at worker start, not mid-run."""
        probe = self._open(timeout_s=10, retries=1)
        try:
            name = f"{CHECK_OBJECT}-{uuid.uuid4().hex}"  # workers starting together
            obstore.put(probe, name, b"ok")
            obstore.head(probe, name)
            obstore.delete(probe, name)
        except CLIENT_ERRORS as error:
            raise BlobStoreError(
                f"the blob store {self.url} cannot be used: {self._reason(error)}"
            ) from None

    def _reason(self, error: Exception) -> str:
        """What went wrong, in words, without the provider's message (it may echo identifiers)."""
        text = str(error)
        if _no_credential_source() and "NoSuchBucket" not in text:
            return (
                "no AWS credentials were found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                "(or run where instance credentials exist)"
            )
        where = self.endpoint or "the S3 endpoint"
        if "NoSuchBucket" in text or "bucket does not exist" in text.lower():
            return f"bucket '{self.bucket}' does not exist; create it or fix EVALBOT_BLOB_URL"
        if REFUSED.search(text):
            return (
                f"the credentials were refused for bucket '{self.bucket}'; check "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )
        if any(word in text.lower() for word in ("connect", "timed out", "dns", "error sending")):
            return f"{where} is unreachable; check EVALBOT_BLOB_ENDPOINT_URL and the network"
        return (
            f"{type(error).__name__} from {where}; check EVALBOT_BLOB_URL, "
            "EVALBOT_BLOB_ENDPOINT_URL, EVALBOT_BLOB_REGION and the AWS credentials"
        )

    # -- writing --------------------------------------------------------------------------------

    def staging(self, key: str) -> Path:
        return fresh_staging(self.scratch, key)

    def reap_staging(self) -> list[str]:
        return reap_staging(self.scratch)

    def commit(self, key: str, staging: Path) -> str:
        """Replace what the key held with the staged files, streamed part by part, then drop
        the staging folder. Nothing refers to the key until the caller stores it."""
        key = safe_key(key)
        old = [meta["path"] for batch in obstore.list(self._store, f"{key}/") for meta in batch]
        if old:
            obstore.delete(self._store, old)
        for path in sorted(p for p in staging.rglob("*") if p.is_file() and not p.is_symlink()):
            name = path.relative_to(staging).as_posix()
            obstore.put(
                self._store,
                f"{key}/{name}",
                path,
                chunk_size=PART_BYTES,
                max_concurrency=PART_CONCURRENCY,
            )
        shutil.rmtree(staging, ignore_errors=True)
        return key

    # -- reading --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def local_copy(self, key: str) -> Iterator[Path]:
        """Download the key's files (streamed, chunk by chunk) into a scratch folder."""
        key = safe_key(key)
        folder = scratch_folder(self.scratch, "read-")
        try:
            try:
                for batch in obstore.list(self._store, f"{key}/"):
                    for meta in batch:
                        name = meta["path"][len(key) + 1 :]
                        self._download(meta["path"], folder / safe_name(name))
            except CLIENT_ERRORS as error:
                raise BlobStoreError(
                    f"could not read {key} from {self.url} ({type(error).__name__})"
                ) from None
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _download(self, path: str, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with dest.open("wb") as handle:
            for chunk in obstore.get(self._store, path).stream(min_chunk_size=READ_CHUNK):
                handle.write(chunk)

    def size(self, key: str, name: str) -> int | None:
        try:
            meta = obstore.head(self._store, f"{safe_key(key)}/{safe_name(name)}")
        except (NotFoundError, FileNotFoundError):
            return None
        return int(meta["size"])

    def read_range(self, key: str, name: str, start: int, length: int) -> bytes | None:
        size = self.size(key, name)
        if size is None:
            return None
        end = min(size, start + length)
        if end <= start:
            return b""
        path = f"{safe_key(key)}/{safe_name(name)}"
        return bytes(obstore.get_range(self._store, path, start=start, end=end))

    async def iter_bytes(self, key: str, name: str, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
        path = f"{safe_key(key)}/{safe_name(name)}"
        result = await obstore.get_async(self._store, path)
        async for data in result.stream(min_chunk_size=chunk):
            yield bytes(data)


def _missing_credential(environ: Mapping[str, str] = os.environ) -> str:
    """Which standard AWS variable is missing, in words, or '' if none is known to be."""
    has_id = bool(environ.get("AWS_ACCESS_KEY_ID"))
    has_secret = bool(environ.get("AWS_SECRET_ACCESS_KEY"))
    if has_id and not has_secret:
        return "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not; set both"
    if has_secret and not has_id:
        return "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not; set both"
    return ""


def _no_credential_source(environ: Mapping[str, str] = os.environ) -> bool:
    """No AWS variable names credentials (instance metadata may still provide some)."""
    return not any(environ.get(name) for name in CREDENTIAL_SOURCES)
