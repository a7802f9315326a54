"""Allocate and touch 10 GB, 64 MB at a time."""

from _common import report

report({"started": True})
hoard = []
for step in range(160):
    hoard.append(bytearray(64 << 20))  # bytearray zero-fills: every page is touched
    report({"allocated_mb": (step + 1) * 64})
