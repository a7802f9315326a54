"""How an image was built, carried in its reference so that runs and the report can tell.

`build_image` returns `<image>#kind=reset&build_s=4.1&base=ab12cd34ef56&newest_age_s=3700` — the
image reference (for `local` a folder), then a fragment:

    kind          prewarmed   the commit is the prewarmed image's own commit: nothing to build
                  reset       the prewarmed image, the commit checked out on top, build.incremental
                  full        build.setup from a clean checkout although a prewarmed ancestor exists
                              (the dependency manifest changed, or no incremental step is declared)
                  cold        build.setup from a clean checkout: no prewarmed image was an ancestor
    build_s       seconds that build took (once: the image is cached per commit)
    base          the prewarmed image's commit (12 hex) it started from, if any
    newest_age_s  age of the repository's newest prewarmed image at that time, if there was one
    reason        why `full`: "deps:<file>,..." or "no-incremental"

The reference travels unchanged from PreparedArm.image to RunResult.image, so the report can warn
about cold builds and stale prewarmed images without another table. Providers strip the fragment
(`split_reference`) before using the image.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

KINDS = ("prewarmed", "reset", "full", "cold")


@dataclass(frozen=True)
class ImageOrigin:
    kind: str
    build_s: float
    base: str = ""
    newest_age_s: float | None = None
    reason: str = ""

    def fragment(self) -> str:
        fields: dict[str, str] = {"kind": self.kind, "build_s": f"{self.build_s:.1f}"}
        if self.base:
            fields["base"] = self.base[:12]
        if self.newest_age_s is not None:
            fields["newest_age_s"] = str(round(self.newest_age_s))
        if self.reason:
            fields["reason"] = self.reason
        return urlencode(fields, safe=":,")


def with_origin(image: str, origin: ImageOrigin) -> str:
    return f"{image}#{origin.fragment()}"


def split_reference(reference: str) -> tuple[str, ImageOrigin | None]:
    """(the image itself, how it was built) — (reference, None) when it carries no origin."""
    image, sep, fragment = reference.rpartition("#")
    if not sep:
        return reference, None
    fields = dict(parse_qsl(fragment))
    if fields.get("kind") not in KINDS:
        return reference, None
    try:
        build_s = float(fields.get("build_s", "0"))
        age = float(fields["newest_age_s"]) if "newest_age_s" in fields else None
    except ValueError:
        return reference, None
    origin = ImageOrigin(
        fields["kind"], build_s, fields.get("base", ""), age, fields.get("reason", "")
    )
    return image, origin


def image_path(reference: str) -> str:
    return split_reference(reference)[0]


def duration(seconds: float) -> str:
    """3m12s, 45s, 1h02m."""
    total = round(seconds)
    if total < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{total}s"
    if total < 3600:
        return f"{total // 60}m{total % 60:02d}s"
    return f"{total // 3600}h{total % 3600 // 60:02d}m"
