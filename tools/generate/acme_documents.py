"""Write the binary documents of worlds/acme-acquisition from tools/generate/acme_sources/.

The outputs are committed; run this only when a source changes:

    .venv/bin/python tools/generate/acme_documents.py

Sources are Markdown-like text: `# ` is the title, `## ` a clause heading, blank lines separate
paragraphs. Each source becomes a .docx (python-docx) or a .pdf (reportlab) at the world path
listed in TARGETS. Output is byte-for-byte reproducible: fixed zip timestamps and core properties
for .docx, reportlab's `invariant` mode for .pdf.

PDFs are written with uncompressed content streams and the standard Helvetica fonts (WinAnsi
encoding), so their text can be read with a regular expression over `(...) Tj` operators; see the
world's README.md. The scanned exhibit is a PNG with no text layer at all, on purpose.
"""

from __future__ import annotations

import io
import random
import zipfile
from datetime import datetime
from pathlib import Path
from xml.sax.saxutils import escape

from docx import Document
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer

ROOT = Path(__file__).resolve().parents[2]
SOURCES = Path(__file__).resolve().parent / "acme_sources"
WORLD = ROOT / "worlds" / "acme-acquisition"
FIXED_TIME = (2024, 4, 5, 9, 0, 0)

# source file -> world-relative output path
TARGETS = {
    "supply-kestrel-automotive.md": "documents/contracts/supply-kestrel-automotive.docx",
    "distribution-vega-iberia.md": "documents/contracts/distribution-vega-iberia.docx",
    "licence-quanta-systems.md": "documents/contracts/licence-quanta-systems.docx",
    "lease-leeds-warehouse.md": "documents/contracts/lease-leeds-warehouse.docx",
    "employment-david-okafor.md": "documents/employment/employment-david-okafor.docx",
    "board-minutes-acme-2024-03-05.md": "documents/board/board-minutes-acme-2024-03-05.docx",
    "distribution-lumen-trading.md": "documents/contracts/distribution-lumen-trading.pdf",
    "lease-rotterdam-depot.md": "documents/contracts/lease-rotterdam-depot.pdf",
    "credit-agreement-northgate.md": "documents/contracts/credit-agreement-northgate.pdf",
    "letter-northgate-reply-2024-03-28.md": (
        "documents/correspondence/letter-northgate-reply-2024-03-28.pdf"
    ),
}
EXHIBIT = "documents/exhibits/exhibit-c-northwind-signature-page.png"


def blocks(source: Path) -> list[tuple[str, str]]:
    """(kind, text) per paragraph: kind is title, heading or body."""
    result = []
    for raw in source.read_text(encoding="utf-8").split("\n\n"):
        text = " ".join(raw.split())
        if not text:
            continue
        if text.startswith("## "):
            result.append(("heading", text[3:]))
        elif text.startswith("# "):
            result.append(("title", text[2:]))
        else:
            result.append(("body", text))
    return result


def write_docx(source: Path, target: Path) -> None:
    document = Document()
    title = next((text for kind, text in blocks(source) if kind == "title"), target.stem)
    properties = document.core_properties
    properties.title = title
    properties.author = "Beta Ltd"
    properties.created = properties.modified = datetime(*FIXED_TIME)
    properties.last_modified_by = "Beta Ltd"
    properties.revision = 1
    for kind, text in blocks(source):
        if kind == "title":
            document.add_heading(text, level=0)
        elif kind == "heading":
            document.add_heading(text, level=1)
        else:
            document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    target.write_bytes(_fixed_zip(buffer.getvalue()))


def _fixed_zip(data: bytes) -> bytes:
    """The same zip with fixed entry timestamps, so regenerating gives identical bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=FIXED_TIME)
            fixed.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


def write_pdf(source: Path, target: Path) -> None:
    styles = getSampleStyleSheet()
    style_for = {
        "title": styles["Title"],
        "heading": styles["Heading3"],
        "body": styles["BodyText"],
    }
    story = []
    for kind, text in blocks(source):
        markup = escape(text).replace("**", "")
        story.append(Paragraph(markup, style_for[kind]))
        story.append(Spacer(1, 2 * mm))
    title = next((text for kind, text in blocks(source) if kind == "title"), target.stem)
    document = SimpleDocTemplate(
        str(target),
        pagesize=A4,
        title=title,
        author="Beta Ltd",
        invariant=1,
        pageCompression=0,
        leftMargin=22 * mm,
        rightMargin=22 * mm,
    )
    document.build(story)


def write_exhibit(target: Path) -> None:
    """A grey, slightly rotated, noisy 'scan' of a signature page: an image, no text layer."""
    rng = random.Random(20210401)  # noqa: S311 - image noise, not security
    page = Image.new("L", (850, 1100), 246)
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default()
    lines = [
        "EXHIBIT C",
        "",
        "ALUMINIUM SUPPLY AGREEMENT dated 1 April 2021",
        "between Northwind Metals plc and Beta Ltd",
        "",
        "SIGNATURE PAGE",
        "",
        "Signed by Graham Ellis, Director,",
        "for and on behalf of Northwind Metals plc",
        "",
        "Signed by Sarah Whitfield, Chief Executive Officer,",
        "for and on behalf of Beta Ltd",
    ]
    for row, line in enumerate(lines):
        draw.text((90, 110 + row * 34), line, fill=40, font=font)
    for y in (420, 560):
        points = [(120 + i * 9, y + rng.randint(-9, 9)) for i in range(28)]
        draw.line(points, fill=25, width=3)
    for _ in range(9000):
        x, y = rng.randrange(850), rng.randrange(1100)
        page.putpixel((x, y), rng.choice((120, 160, 200)))
    scan = page.rotate(0.8, fillcolor=210).filter(ImageFilter.GaussianBlur(0.6))
    scan.save(target, format="PNG", optimize=True)


def write_all(world: Path = WORLD) -> list[Path]:
    """Write every binary document of the world under `world`; returns the paths written."""
    written = []
    for name, relative in TARGETS.items():
        target = world / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        writer = write_docx if target.suffix == ".docx" else write_pdf
        writer(SOURCES / name, target)
        written.append(target)
    exhibit = world / EXHIBIT
    exhibit.parent.mkdir(parents=True, exist_ok=True)
    write_exhibit(exhibit)
    return [*written, exhibit]


def main() -> None:
    for path in write_all():
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
