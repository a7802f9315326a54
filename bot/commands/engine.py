"""`evalbot run | status | results | worker | demo` — the engine's commands (filled in by the engine)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
