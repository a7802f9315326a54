"""docs/settings.md is generated from workflows/settings.py: the committed page must be what
tools/settings_doc.py prints now, so a setting cannot change without its documentation."""

from __future__ import annotations

import difflib
import subprocess
import sys

from tests.conftest import REPO_ROOT

COMMAND = ".venv/bin/python tools/settings_doc.py > docs/settings.md"


def test_docs_settings_md_is_generated_from_the_models() -> None:
    printed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "settings_doc.py")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    ).stdout
    committed = (REPO_ROOT / "docs" / "settings.md").read_text()
    if printed != committed:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                printed.splitlines(keepends=True),
                "docs/settings.md (committed)",
                "tools/settings_doc.py (now)",
            )
        )
        raise AssertionError(f"docs/settings.md is stale; run `{COMMAND}`\n{diff[:4000]}")


def test_the_readme_links_the_settings_page() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert "(docs/settings.md)" in readme
