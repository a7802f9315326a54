"""Print docs/settings.md, the list of every setting, from the models in workflows/settings.py.

    .venv/bin/python tools/settings_doc.py > docs/settings.md

`make test` checks that the committed page is what this prints
(tests/workflows/test_settings_doc.py).
"""

from __future__ import annotations

import inspect
import json
import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from annotated_types import Ge, Gt, Le, Lt  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402
from pydantic_settings import BaseSettings  # noqa: E402

from workflows.settings import Settings, env_var, group_model  # noqa: E402

COMMAND = ".venv/bin/python tools/settings_doc.py > docs/settings.md"

HEADER = f"""\
# Settings

<!-- Generated from workflows/settings.py by tools/settings_doc.py: do not edit by hand.
     After changing a setting run
         {COMMAND}
     `make test` fails while this page is stale. -->

evalbot is configured by `EVALBOT_*` environment variables only. Build a `Settings` once where
the process starts (CLI group, worker, web app: `bot/composition.py`) and pass it down; nothing
reads the environment at import time.

Settings come in groups by concern. In code a setting is `settings.<group>.<field>`
(`settings.judge.model`, `settings.temporal.address`); the state folders are at the top level
(`settings.data_dir`). A group's variables are named `EVALBOT_<GROUP>_<FIELD>`
(`EVALBOT_JUDGE_MODEL`); a setting whose variable predates the groups keeps that name, which is the
one listed (`sandbox.provider` is `EVALBOT_PROVIDER`, not `EVALBOT_SANDBOX_PROVIDER`). Each setting
has exactly one variable.

Values are parsed by pydantic: numbers and `true`/`false` as written, lists and dicts as JSON,
`SecretStr` values never appear in a repr, log line or error message.

In code (tests, benchmarks), give a group as a dict or a group instance; the environment still fills
the fields not given. `with_changes` makes a validated copy, merging a group's dict into the group:

```python
settings = Settings(data_dir=tmp, sandbox={{"provider": "process", "allow_process_provider": True}})
faster = settings.with_changes(sandbox={{"poll_interval_s": 0.2}}, judge={{"base_url": url}})
```

The flat keyword names of the settings before they were grouped (`Settings(provider=...)`,
`judge_base_url=...`) are not accepted: unknown names are an error, never silently ignored.
"""


def type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(json.dumps(arg) for arg in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(arg) for arg in get_args(annotation))
    if origin is not None:
        return f"{origin.__name__}[{', '.join(type_name(arg) for arg in get_args(annotation))}]"
    if annotation is type(None):
        return "None"
    return str(getattr(annotation, "__name__", annotation))


def bounds(info: FieldInfo) -> str:
    signs = {Ge: "≥", Gt: ">", Le: "≤", Lt: "<"}
    parts = []
    for constraint in info.metadata:
        for kind, sign in signs.items():
            if isinstance(constraint, kind):
                parts.append(f"{sign} {getattr(constraint, kind.__name__.lower())}")
    return ", ".join(parts)


def default_text(info: FieldInfo) -> str:
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list):
        return f"`{json.dumps(value)}`"
    if value == "":
        return '`""`'
    return f"`{value}`"


def prose(text: str) -> str:
    """One line of Markdown: `<data_dir>` shown as written, not taken for an HTML tag."""
    return " ".join(text.split()).replace("<", "&lt;")


def cell(text: str) -> str:
    return prose(text).replace("|", "\\|")


def fields_table(model: type[BaseSettings], prefix: str, names: list[str]) -> list[str]:
    rows = [
        "| setting | variable | type | default | description |",
        "|---|---|---|---|---|",
    ]
    for name in names:
        info = model.model_fields[name]
        kind = type_name(info.annotation)
        limit = bounds(info)
        rows.append(
            f"| `{prefix}{name}` | `{env_var(model, name)}` "
            f"| {cell(f'`{kind}`' + (f' ({limit})' if limit else ''))} "
            f"| {cell(default_text(info))} | {cell(info.description or '')} |"
        )
    return rows


def derived(model: type[BaseSettings], prefix: str) -> list[str]:
    """The read-only values a model derives from its settings (its properties)."""
    lines = []
    for name, member in vars(model).items():
        if isinstance(member, property):
            doc = prose(inspect.getdoc(member) or "")
            lines.append(f"- `{prefix}{name}`: {doc}")
    return ["", "Derived (read-only):", "", *lines] if lines else []


def paragraph(model: type[BaseSettings]) -> str:
    return prose(inspect.getdoc(model) or "")


def render() -> str:
    out = [HEADER]
    top = [name for name in Settings.model_fields if name not in Settings.GROUPS]
    out += ["## Top level: `settings.<field>`", "", paragraph(Settings), ""]
    out += fields_table(Settings, "", top)
    out += derived(Settings, "")
    for group in Settings.GROUPS:
        model = group_model(group)
        out += ["", f"## {group}: `settings.{group}.<field>`", "", paragraph(model), ""]
        out += fields_table(model, f"{group}.", list(model.model_fields))
        out += derived(model, f"{group}.")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
