"""Per-case flips between two arms: cases that passed in one and failed in the other.

A case passes in an arm when its mean score over judged trials is at least PASS_THRESHOLD (for a
binary criterion: most of its trials passed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PASS_THRESHOLD = 0.5


@dataclass(frozen=True)
class Flips:
    pass_to_fail: tuple[str, ...] = ()  # passed in base, failed in head
    fail_to_pass: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return len(self.pass_to_fail) + len(self.fail_to_pass)


def case_flips(
    base_means: Mapping[str, float], head_means: Mapping[str, float], cases: Iterable[str]
) -> Flips:
    """Flips among `cases` (each must have a mean in both mappings), in the given order."""
    down, up = [], []
    for case in cases:
        before = base_means[case] >= PASS_THRESHOLD
        after = head_means[case] >= PASS_THRESHOLD
        if before and not after:
            down.append(case)
        elif after and not before:
            up.append(case)
    return Flips(tuple(down), tuple(up))
