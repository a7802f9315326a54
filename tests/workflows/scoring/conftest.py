from __future__ import annotations

from pathlib import Path

import pytest

from .support import RunDir, build_world


@pytest.fixture
def world_dir(tmp_path: Path) -> Path:
    return build_world(tmp_path)


@pytest.fixture
def run(tmp_path: Path, world_dir: Path) -> RunDir:
    return RunDir(tmp_path / "outputs", world_dir)
