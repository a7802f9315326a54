"""`python -m tests.fakes.modal_server --root DIR --port 0 --ready-file FILE [knobs]`."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from tests.fakes.modal_server.server import serve
from tests.fakes.modal_server.state import Knobs


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.modal_server")
    parser.add_argument("--root", type=Path, required=True, help="the cloud's folder")
    parser.add_argument("--port", type=int, default=0, help="gRPC port (0: any free port)")
    parser.add_argument("--ready-file", type=Path, help="written with the ports once serving")
    parser.add_argument("--start-latency-s", type=float, default=0.0)
    parser.add_argument("--create-rate-per-s", type=float, default=None)
    parser.add_argument("--max-starting", type=int, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    knobs = Knobs(args.start_latency_s, args.create_rate_per_s, args.max_starting)
    asyncio.run(serve(args.root, args.port, args.ready_file, knobs))


if __name__ == "__main__":
    main()
