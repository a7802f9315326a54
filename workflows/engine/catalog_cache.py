"""Per-worker cache of datasets, worlds and world file hashes (loading them is not free)."""

from __future__ import annotations

from pathlib import Path

from workflows.catalog.catalog_errors import UnknownNameError
from workflows.catalog.hashing import tree_hashes
from workflows.catalog.loaders import load_dataset, load_world
from workflows.catalog.models import Case, Dataset, World


class CatalogCache:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._datasets: dict[str, Dataset] = {}
        self._worlds: dict[str, World] = {}
        self._hashes: dict[str, dict[str, str]] = {}

    def dataset(self, name: str) -> Dataset:
        if name not in self._datasets:
            self._datasets[name] = load_dataset(self.root, name)
        return self._datasets[name]

    def case(self, dataset: str, case_id: str) -> Case:
        for case in self.dataset(dataset).cases:
            if case.id == case_id:
                return case
        raise UnknownNameError("case", case_id, [c.id for c in self.dataset(dataset).cases])

    def world(self, name: str) -> World:
        if name not in self._worlds:
            self._worlds[name] = load_world(self.root, name)
        return self._worlds[name]

    def world_hashes(self, world: World) -> dict[str, str]:
        """`relative path -> sha256` of the world's pristine files, by world version."""
        if world.version not in self._hashes:
            self._hashes[world.version] = tree_hashes(world.path)
        return self._hashes[world.version]
