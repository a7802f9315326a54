"""Shared by the hostile agents: where to write what they observed."""

import json
import os


def out_dir() -> str:
    return os.environ.get("EVALBOT_OUT_DIR", "/out")


def report(result: object) -> None:
    with open(os.path.join(out_dir(), "result.json"), "w") as handle:
        json.dump(result, handle)
