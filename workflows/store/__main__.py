"""`python -m workflows.store revision MESSAGE` writes a migration; `upgrade URL` applies them."""

from __future__ import annotations

import sys

from workflows.store.store_errors import StoreError

USAGE = "usage: python -m workflows.store revision MESSAGE | upgrade DATABASE_URL"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("revision", "upgrade"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        if argv[0] == "revision":
            from workflows.store.revise import write_revision

            print(write_revision(argv[1]))
        else:
            from workflows.store.store import Store

            with Store(argv[1]) as store:
                store.migrate()
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
