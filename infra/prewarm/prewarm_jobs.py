"""The prewarm job (hourly, `evalbot prewarm`): build the head of a ref into a prewarmed image,
record it, and garbage-collect old ones; and the status the CLI shows.

Retention: per (repo, provider) keep the newest `keep_last` images, and any image a running
experiment needs (the provider refuses to discard those: PrewarmInUse). Everything else goes, from
the provider and from the `prewarmed_images` table. When the ref's head already has the newest
image, the provider does not rebuild it (unless asked to) but marks it current, and so does the
table (`checked_at`): staleness means "the job stopped running", not "main did not move".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from workflows.engine.repos import agent_config_at, fetch, is_remote, local_repo, resolve_ref
from workflows.providers.base import (
    PrewarmedImage,
    PrewarmInUse,
    ProviderRefused,
    SandboxError,
    SandboxProvider,
)
from workflows.store import Store
from workflows.store.prewarmed_images import PrewarmRecord, PrewarmRecords

STALE_AFTER_S = 2 * 3600  # the report and `prewarm status` warn past this age


def repo_identity(repo: str) -> str:
    """How a repository is named in the table: its URL, or its absolute path."""
    return repo if is_remote(repo) else str(Path(repo).expanduser().resolve())


@dataclass
class PrewarmOutcome:
    record: PrewarmRecord
    built: bool  # False: the head already had an image, now marked current
    removed: list[str] = field(default_factory=list)
    kept_in_use: list[str] = field(default_factory=list)


@dataclass
class GcOutcome:
    removed: list[str] = field(default_factory=list)
    kept_in_use: list[str] = field(default_factory=list)


def retention_candidates(records: Sequence[PrewarmRecord], keep_last: int) -> list[PrewarmRecord]:
    """All but the newest `keep_last` images of each (repo, provider)."""
    seen: dict[tuple[str, str], int] = {}
    doomed = []
    for record in sorted(records, key=lambda r: r.created_at, reverse=True):
        key = (record.repo, record.provider)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > keep_last:
            doomed.append(record)
    return doomed


class PrewarmJobs:
    def __init__(
        self, provider: SandboxProvider, records: PrewarmRecords, store: Store, mirrors: Path
    ) -> None:
        self.provider = provider
        self.records = records
        self.store = store
        self.mirrors = mirrors

    def source(self, repo: str) -> Path:
        path = local_repo(repo, self.mirrors)
        if is_remote(repo):
            fetch(path)
        return path

    async def prewarm(
        self, repo: str, ref: str, *, keep_last: int, rebuild: bool = False
    ) -> PrewarmOutcome:
        source = await asyncio.to_thread(self.source, repo)
        sha = await asyncio.to_thread(resolve_ref, source, ref)
        config = await asyncio.to_thread(agent_config_at, source, sha)
        image = await self.provider.prewarm(source, sha, config.build.setup, rebuild=rebuild)
        record = await asyncio.to_thread(self._save, repo_identity(repo), image)
        outcome = PrewarmOutcome(record, built=not image.reused)
        gc = await self.collect_garbage(keep_last, repo=repo)
        outcome.removed, outcome.kept_in_use = gc.removed, gc.kept_in_use
        return outcome

    def _save(self, repo: str, image: PrewarmedImage) -> PrewarmRecord:
        now = datetime.now(UTC)
        for known in self.records.records(repo):
            if (known.provider, known.reference) == (self.provider.name, image.reference):
                self.records.touch(known.provider, known.reference, now)
                return known.model_copy(update={"checked_at": now})
        record = PrewarmRecord(
            repo=repo, commit=image.commit, provider=self.provider.name,
            reference=image.reference, build_seconds=image.build_seconds,
            size_bytes=image.size_bytes, created_at=now, checked_at=now,
        )  # fmt: skip
        self.records.add(record)
        return record

    async def collect_garbage(self, keep_last: int, *, repo: str | None = None) -> GcOutcome:
        identity = repo_identity(repo) if repo else None
        records = await asyncio.to_thread(self.records.records, identity)
        mine = [r for r in records if r.provider == self.provider.name]
        outcome = GcOutcome()
        for record in retention_candidates(mine, keep_last):
            if await self._discard(record):
                outcome.removed.append(record.reference)
            else:
                outcome.kept_in_use.append(record.reference)
        return outcome

    async def _discard(self, record: PrewarmRecord) -> bool:
        protect = await asyncio.to_thread(self.running_commits, record.repo)
        try:
            source = await asyncio.to_thread(local_repo, record.repo, self.mirrors)
            await self.provider.discard_prewarmed(source, record.reference, protect=protect)
        except PrewarmInUse:
            return False
        except ProviderRefused:
            return False
        except (SandboxError, OSError) as error:
            raise SandboxError(f"could not discard {record.reference}: {error}") from None
        await asyncio.to_thread(self.records.delete, record.provider, record.reference)
        return True

    def running_commits(self, repo: str) -> set[str]:
        """Commits of the arms of running experiments on `repo`: their images must stay."""
        commits: set[str] = set()
        for status in ("pending", "running"):
            for experiment in self.store.list_experiments(status=status, limit=10_000):
                if repo_identity(experiment.spec.repo) == repo:
                    commits.update(arm.commit for arm in experiment.spec.arms)
        return commits


@dataclass(frozen=True)
class ImageStatus:
    record: PrewarmRecord
    age_s: float

    @property
    def stale(self) -> bool:
        return self.age_s > STALE_AFTER_S

    def as_dict(self) -> dict[str, object]:
        return self.record.model_dump(mode="json") | {
            "age_s": round(self.age_s),
            "stale": self.stale,
        }


def prewarm_status(records: PrewarmRecords, now: datetime) -> list[ImageStatus]:
    """The newest image of each repository and its age."""
    return [ImageStatus(r, r.age_s(now)) for r in records.newest_per_repo()]
