"""A broken catalog file fails with the file, the field and what was expected."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError


class CatalogError(Exception):
    """A catalog file could not be loaded. `str()` is one sentence a person can act on."""

    def __init__(self, file: Path | str, field: str | None, problem: str) -> None:
        self.file = str(file)
        self.field = field
        self.problem = problem
        where = f"{self.file}: {field}" if field else self.file
        super().__init__(f"{where}: {problem}")

    @classmethod
    def from_validation(cls, file: Path | str, error: ValidationError) -> CatalogError:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        return cls(file, field, first["msg"])


class UnknownNameError(LookupError):
    """A dataset, world or case that is not in the catalog; lists the ones that are."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = known
        listing = ", ".join(sorted(known)) or "none"
        super().__init__(f"unknown {kind} '{name}'; known {kind}s: {listing}")
