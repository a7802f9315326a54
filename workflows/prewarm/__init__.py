"""Images of agent repositories, built ahead of time (docs/prewarm.md).

Built checkouts cached per commit (`image_builder`), prewarmed snapshots of main (`snapshots`,
`prewarmer`), resets of a later commit on top of one (`reset_builder`, `reset_git`, `layers`,
`manifest`), the label a built image carries (`image_label`) and the `local` provider's warm pool
(`warm_pool`). The providers use these; they depend on the sandbox contract
(workflows/providers/base.py) and the shared sandbox layout, never on a provider: what the pool
needs of one it takes as a Protocol (`PoolHost`). The hourly job that drives prewarming is
infra/prewarm.
"""

from workflows.prewarm.image_builder import ImageBuilder, SetupRunner
from workflows.prewarm.image_label import (
    ImageOrigin,
    duration,
    image_path,
    split_reference,
    with_origin,
)
from workflows.prewarm.prewarmer import Prewarmer
from workflows.prewarm.reset_builder import ResetBuilder
from workflows.prewarm.snapshots import SnapshotIndex
from workflows.prewarm.warm_pool import PooledSandbox, PoolHost, WarmPool

__all__ = [
    "ImageBuilder",
    "ImageOrigin",
    "PoolHost",
    "PooledSandbox",
    "Prewarmer",
    "ResetBuilder",
    "SetupRunner",
    "SnapshotIndex",
    "WarmPool",
    "duration",
    "image_path",
    "split_reference",
    "with_origin",
]
