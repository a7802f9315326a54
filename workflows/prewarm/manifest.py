"""Which changed files invalidate a prewarmed build: the dependency manifest.

A reset runs `build.incremental` on top of the prewarmed build only when none of these changed
between the prewarmed commit and the target; otherwise the dependencies may differ and the image
is built with `build.setup` from a clean checkout. Matched by file name at any depth (monorepos keep
one manifest per package):

- Python: pyproject.toml, setup.py, setup.cfg, requirements*.txt (and any .txt under a
  `requirements/` folder), constraints*.txt, Pipfile, Pipfile.lock, poetry.lock, uv.lock, pdm.lock,
  environment.yml / environment.yaml (conda), .python-version
- JavaScript: package.json, package-lock.json, npm-shrinkwrap.json, yarn.lock, pnpm-lock.yaml,
  bun.lockb, .nvmrc
- others: Cargo.toml, Cargo.lock, go.mod, go.sum, Gemfile, Gemfile.lock
- evalbot.toml itself (the build commands may have changed)
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import PurePosixPath

MANIFEST_NAMES = frozenset(
    {
        "pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "Pipfile.lock", "poetry.lock",
        "uv.lock", "pdm.lock", "environment.yml", "environment.yaml", ".python-version",
        "package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml",
        "bun.lockb", ".nvmrc", "Cargo.toml", "Cargo.lock", "go.mod", "go.sum", "Gemfile",
        "Gemfile.lock", "evalbot.toml",
    }
)  # fmt: skip
MANIFEST_PATTERNS = ("requirements*.txt", "constraints*.txt")


def is_manifest(path: str) -> bool:
    pure = PurePosixPath(path)
    if pure.name in MANIFEST_NAMES:
        return True
    if any(fnmatchcase(pure.name, pattern) for pattern in MANIFEST_PATTERNS):
        return True
    return pure.suffix == ".txt" and "requirements" in pure.parts[:-1]


def changed_manifests(paths: Iterable[str]) -> list[str]:
    return sorted({path for path in paths if is_manifest(path)})
