"""A terminal progress bar for an experiment: cells queued / running / scored / errored."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from workflows.engine.types import Progress as ExperimentProgress


class ProgressDisplay:
    """Draws on stderr so stdout stays the report; does nothing when disabled (--json)."""

    def __init__(self, experiment_id: str, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
            disable=not enabled,
        )
        self.task = self.bar.add_task(experiment_id, total=None, detail="starting")

    def update(self, progress: ExperimentProgress) -> None:
        detail = (
            f"queued {progress.queued} · running {progress.running} · "
            f"scored {progress.scored} · errored {progress.errored}"
        )
        if progress.cancelled:
            detail += f" · cancelled {progress.cancelled}"
        self.bar.update(self.task, total=progress.total, completed=progress.finished, detail=detail)

    def __enter__(self) -> ProgressDisplay:
        self.bar.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.bar.stop()
