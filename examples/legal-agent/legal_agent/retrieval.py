"""Rank chunks for a query: a plain keyword count, or Okapi BM25 with light stemming.

`search` returns the global top-k, or with `spread` the best two chunks of each document (documents
whose best chunk scores at least SPREAD_FLOOR of the best overall), so that list questions see every
document that might answer them instead of several chunks of the same few.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from dataclasses import dataclass

from legal_agent.chunks import Chunk

WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
STOPWORDS = frozenset(
    """
    a about after all also an and any are as at be been before being between both but by can
    cite could did do does each either for from give has have he her his how i if in into is
    it its list may me must my name no not of on or our out over please say shall she should
    so such than that the their them then there these they this those to under up upon us
    was we were what when where whether which while who why will with within would you your
    """.split()  # noqa: SIM905 - a word list reads better as text
)
SPREAD_FLOOR = 0.35
SPREAD_FACTOR = 4  # with spread, up to top_k * SPREAD_FACTOR documents
SPREAD_PER_DOCUMENT = 2
K1, B = 1.5, 0.75


def tokens(text: str, stem: bool = False) -> list[str]:
    words = [w.removesuffix("'s") for w in WORD.findall(text.lower())]
    words = [w for w in words if w not in STOPWORDS and len(w) > 1]
    return [_stem(w) for w in words] if stem else words


def _stem(word: str) -> str:
    for suffix, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: len(word) - len(suffix)] + replacement
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float


class KeywordRetriever:
    """Score = how often the query's words occur in the chunk (no weighting, no stemming)."""

    name = "keyword"

    def __init__(self, chunks: list[Chunk]) -> None:
        self.chunks = chunks
        self.counts = [Counter(tokens(c.full_text)) for c in chunks]

    def scores(self, query: str) -> list[float]:
        terms = set(tokens(query))
        return [float(sum(counts[t] for t in terms)) for counts in self.counts]


class BM25Retriever:
    """Okapi BM25 over stemmed tokens, with IDF from this set of chunks."""

    name = "bm25"

    def __init__(self, chunks: list[Chunk]) -> None:
        self.chunks = chunks
        self.counts = [Counter(tokens(c.full_text, stem=True)) for c in chunks]
        self.lengths = [sum(c.values()) for c in self.counts]
        self.average = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        frequency: Counter[str] = Counter()
        for counts in self.counts:
            frequency.update(counts.keys())
        n = len(chunks)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}

    def scores(self, query: str) -> list[float]:
        terms = Counter(tokens(query, stem=True))
        result = []
        for counts, length in zip(self.counts, self.lengths, strict=True):
            norm = K1 * (1 - B + B * length / self.average)
            result.append(
                sum(
                    self.idf.get(t, 0.0) * counts[t] * (K1 + 1) / (counts[t] + norm) * qf
                    for t, qf in terms.items()
                    if counts[t]
                )
            )
        return result


def make_retriever(name: str, chunks: list[Chunk]) -> KeywordRetriever | BM25Retriever:
    return BM25Retriever(chunks) if name == "bm25" else KeywordRetriever(chunks)


def search(
    retriever: KeywordRetriever | BM25Retriever,
    query: str,
    top_k: int,
    rng: random.Random,
    spread: bool = False,
) -> list[Hit]:
    """Best chunks first. Ties are broken at random (the seed), as a sampling model would."""
    scored = [
        Hit(chunk, score)
        for chunk, score in zip(retriever.chunks, retriever.scores(query), strict=True)
        if score > 0
    ]
    jitter = {id(hit): rng.random() for hit in scored}
    scored.sort(key=lambda hit: (hit.score, jitter[id(hit)]), reverse=True)
    if not spread:
        return scored[:top_k]
    per_document: dict[str, list[Hit]] = {}
    for hit in scored:
        kept = per_document.setdefault(hit.chunk.path, [])
        if len(kept) < SPREAD_PER_DOCUMENT:
            kept.append(hit)
    floor = SPREAD_FLOOR * scored[0].score if scored else 0.0
    documents = [hits for hits in per_document.values() if hits[0].score >= floor]
    return [hit for hits in documents[: top_k * SPREAD_FACTOR] for hit in hits]
