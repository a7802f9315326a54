"""Run outputs (transcripts, answers, world changes) by key, on a local folder or an S3 bucket:
see workflows/blobs/base.py for the interface and layout, docs/store.md ("Blobs") for the rest."""

from workflows.blobs.base import BlobStore, BlobStoreError, safe_key, safe_name
from workflows.blobs.factory import open_blob_store
from workflows.blobs.local import LocalBlobStore

__all__ = [
    "BlobStore",
    "BlobStoreError",
    "LocalBlobStore",
    "open_blob_store",
    "safe_key",
    "safe_name",
]
