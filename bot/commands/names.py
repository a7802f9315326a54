"""Click callbacks checking names given on the command line against the catalog's rule
(workflows/catalog/names.py) before a command joins them into a path: a bad `--dataset` is a
usage error (exit 2) naming the rule."""

from __future__ import annotations

from collections.abc import Callable

import click

from workflows.catalog.names import InvalidNameError, check_name


def name_callback(kind: str) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """A click `callback=` that refuses a `kind` name ('dataset', 'case') breaking the rule."""

    def check(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_name(kind, value)
        except InvalidNameError as error:
            raise click.BadParameter(str(error)) from None

    return check
