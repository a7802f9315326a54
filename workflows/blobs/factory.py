"""The blob store the settings name: `EVALBOT_BLOB_URL` (docs/store.md, "Blobs")."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from workflows.blobs.base import BlobStore, BlobStoreError
from workflows.blobs.local import LocalBlobStore
from workflows.settings import Settings


def open_blob_store(settings: Settings) -> BlobStore:
    """The local folder (`<data_dir>/blobs` unless `file://…` says otherwise) or an S3 bucket
    (`s3://bucket/prefix`). Builds the client only; `check()` talks to the store."""
    url = settings.store.blob_url.strip()
    if not url:
        return LocalBlobStore(settings.blob_dir)
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in {"", "localhost"}:
            raise BlobStoreError(f"EVALBOT_BLOB_URL {url} names a host; use file:///absolute/path")
        return LocalBlobStore(Path(unquote(parsed.path)))
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise BlobStoreError(f"EVALBOT_BLOB_URL {url} names no bucket; use s3://bucket/prefix")
        from workflows.blobs.s3 import S3BlobStore  # the S3 client is only loaded when used

        return S3BlobStore(
            parsed.netloc,
            unquote(parsed.path),
            scratch=settings.blob_dir,
            endpoint=settings.store.blob_endpoint_url or None,
            region=settings.store.blob_region or None,
        )
    raise BlobStoreError(
        f"EVALBOT_BLOB_URL {url} is neither s3://bucket/prefix nor file:///path; fix it"
    )
