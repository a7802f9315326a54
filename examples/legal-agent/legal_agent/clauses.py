"""What a clause is about, and the values in it: dates, amounts, laws, notice periods and
categories."""

from __future__ import annotations

import re
from datetime import date

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
DATE = re.compile(r"\b(\d{1,2}) (" + "|".join(MONTHS) + r") (\d{4})\b")
MONEY = re.compile(r"(US\$|S\$|\$|£|€)\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
PERCENT = re.compile(r"\b(\d+(?:\.\d+)?) per cent\b")
LAW = re.compile(
    r"governed by (?:the )?laws? of (?:the )?(?:State of )?"
    r"(England and Wales|Scotland|Ireland|Spain|Singapore|New York|Delaware|Netherlands|Germany)"
)
PERIOD = re.compile(
    r"\b(\d+|one|two|three|six|nine|twelve) (business days|days|weeks|months|years)'?"
    r"(?: \(\w+\))?(?: prior)?(?: written)? notice",
    re.I,
)
CURRENCY = {"£": "GBP", "€": "EUR", "$": "USD", "US$": "USD", "S$": "SGD"}

# topic -> (what a question says, what a clause says). Question phrases match at word starts.
TOPICS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "change_of_control": (
        ("change of control", "change-of-control", "acquisition", "sale of beta"),
        ("change of control",),
    ),
    "exclusivity": (("exclusiv",), ("exclusive", "exclusively")),
    "governing_law": (
        ("governing law", "governed by", "which law", "law other than", "jurisdiction"),
        ("governed by", "governing law"),
    ),
    "renewal": (("renew",), ("renew", "continues automatically", "continue automatically")),
    "term": (
        ("expire", "expiry", "term of", "how long", "end date", "repayment date"),
        (
            "continues until",
            "starts on",
            "for a term of",
            "runs for",
            "ends on",
            "until",
            "termination date",
            "expiry date",
            "repaid in full",
        ),
    ),
    "termination": (
        ("terminat", "end the contract"),
        ("may terminate", "may end", "until terminated"),
    ),
    "liability": (("liability", "cap on", "capped"), ("liability",)),
    "notices": (
        ("notice address", "address", "notices to", "formal notice"),
        ("notices", "shall be sent to", "must now be sent"),
    ),
    "rent": (("rent",), ("rent",)),
    "break": (("break",), ("break date", "may end this lease")),
    "facility": (("facility", "commitment"), ("facility in an aggregate amount", "commitment")),
    "margin": (("margin", "interest rate"), ("margin",)),
    "salary": (("salary", "remuneration"), ("salary",)),
    "notice_period": (
        ("notice period", "notice must", "notice applies"),
        ("months' written notice", "months' notice"),
    ),
    "confidentiality": (("confidential",), ("confidential",)),
    "non_solicitation": (("solicit",), ("solicit",)),
    "consent_status": (("agreed to waive", "waive", "consented", "conditions"), ("consents",)),
}


def question_topics(question: str) -> list[str]:
    lowered = question.lower()
    return [
        topic
        for topic, (asks, _) in TOPICS.items()
        if any(re.search(rf"\b{re.escape(a)}", lowered) for a in asks)
    ]


def chunk_topics(text: str) -> set[str]:
    lowered = text.lower()
    return {topic for topic, (_, marks) in TOPICS.items() if any(m in lowered for m in marks)}


def has_topic(text: str, topic: str) -> bool:
    return topic in chunk_topics(text)


def has_value(topic: str, text: str) -> bool:
    """Whether the clause states the value the topic asks for (an amount, a date, a law ...)."""
    if topic in ("liability", "rent", "facility", "salary"):
        return bool(MONEY.search(text))
    if topic in ("term", "break"):
        return bool(DATE.search(text))
    if topic == "governing_law":
        return governing_law(text) is not None
    if topic == "margin":
        return bool(PERCENT.search(text))
    if topic in ("notice_period", "termination"):
        return notice_period(text) is not None
    if topic == "change_of_control":
        return coc_category(text) not in ("none", "other")
    if topic == "notices":
        lowered = text.lower()
        return "sent to" in lowered or "given to" in lowered or "notices to" in lowered
    return True


def dates(text: str) -> list[date]:
    return [
        date(int(year), MONTHS.index(month) + 1, int(day))
        for day, month, year in DATE.findall(text)
    ]


def human_date(value: date | str) -> str:
    if isinstance(value, str):
        value = date.fromisoformat(value)
    return f"{value.day} {MONTHS[value.month - 1]} {value.year}"


def amounts(text: str) -> list[tuple[str, float, str]]:
    """(as written, value, currency code)."""
    return [
        (f"{symbol}{digits}", float(digits.replace(",", "")), CURRENCY[symbol])
        for symbol, digits in MONEY.findall(text)
    ]


def governing_law(text: str) -> str | None:
    found = LAW.search(text)
    if not found:
        return None
    law = found.group(1)
    return "the Netherlands" if law == "Netherlands" else law


def notice_period(text: str) -> str | None:
    found = PERIOD.search(text)
    return f"{found.group(1)} {found.group(2)}" if found else None


def coc_category(text: str) -> str:
    """What a change-of-control clause does, in the database's vocabulary."""
    lowered = text.lower()
    if "change of control" not in lowered:
        return "none"
    if "due and payable" in lowered or "prepay" in lowered:
        return "prepayment"
    if "consent" in lowered:
        return "consent"
    if "terminate" in lowered:
        return "termination_right"
    if "bonus" in lowered or "payment" in lowered:
        return "payment"
    if "notify" in lowered or "notice" in lowered:
        return "notice"
    return "other"


def is_exclusive(text: str) -> bool:
    lowered = text.lower()
    without_negatives = re.sub(r"non-exclusive|no exclusivity|not exclusive", "", lowered)
    return "exclusive" in without_negatives and "exclusive jurisdiction" not in without_negatives


def renews_automatically(text: str) -> bool:
    lowered = text.lower()
    if "no automatic renewal" in lowered:
        return False
    return bool(
        re.search(r"(renews?|continues?|renewed) automatically|automatic(ally)? renew", lowered)
    )


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.;])\s+(?=[A-Z(\"])", text) if s.strip()]
