"""One run's state: the case, the matter, settings, random streams, the transcript, and helpers the
skills share (search, document linking, citations)."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from legal_agent.chunks import Chunk, split
from legal_agent.config import Paths, Settings
from legal_agent.corpus import Document, Matter
from legal_agent.retrieval import Hit, make_retriever, search, tokens
from legal_agent.trace import Trace

GENERIC = frozenset(
    {
        "ltd", "plc", "inc", "gmbh", "llc", "llp", "pte", "corp", "s.l",
        "b.v", "bv", "co", "the", "and", "of", "contract", "agreement",
    }
)  # fmt: skip
CONTRACT_TYPES = ("contract",)


@dataclass
class Answer:
    text: str
    sources: list[str] = field(default_factory=list)
    data: dict | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Slips:
    """Mistakes a model makes now and then, drawn up front from the seed so that two arms given
    the same seed make the same ones (common random numbers)."""

    cite_titles: bool = False

    @classmethod
    def draw(cls, seed: int, rate: float) -> Slips:
        rng = random.Random(seed)  # noqa: S311 - simulation, not security
        return cls(cite_titles=rng.random() < rate)


class Run:
    def __init__(self, case: dict, settings: Settings, matter: Matter, paths: Paths, trace: Trace):
        self.case = case
        self.prompt: str = case["prompt"]
        self.settings = settings
        self.matter = matter
        self.paths = paths
        self.trace = trace
        seed = int(case.get("seed", 0))
        self.rng = random.Random(seed * 7919 + 1)  # noqa: S311 - tie-breaks
        self.slips = Slips.draw(seed, settings.slip_rate)
        self._chunks: dict[str, list[Chunk]] = {}
        self.last_hits: list[Hit] = []

    # --- documents -------------------------------------------------------------------------
    @property
    def readable(self) -> list[Document]:
        """What the acting user may read (everything, with permissions=ignore)."""
        if not self.settings.respect_permissions:
            return list(self.matter.documents)
        return self.matter.readable

    def contracts(self, docs: list[Document] | None = None) -> list[Document]:
        docs = self.readable if docs is None else docs
        typed = [d for d in docs if d.doc_type in CONTRACT_TYPES or d.doc_type == "employment"]
        return typed or [d for d in docs if d.text]

    def chunks(self, doc: Document) -> list[Chunk]:
        if doc.path not in self._chunks:
            self._chunks[doc.path] = split(doc)
        return self._chunks[doc.path]

    def read_document(self, doc: Document) -> list[Chunk]:
        chunks = self.chunks(doc)
        self.trace.read(doc.text or "")
        self.trace.step("read", path=doc.path, chunks=len(chunks))
        return chunks

    def related(self, doc: Document) -> list[Document]:
        """Other readable documents about the same contract, newest first."""
        if doc.contract_id is None:
            return []
        same = [d for d in self.readable if d.contract_id == doc.contract_id and d.path != doc.path]
        return sorted((d for d in same if d.text), key=lambda d: d.date, reverse=True)

    # --- retrieval -------------------------------------------------------------------------
    def search(
        self, query: str, docs: list[Document], top_k: int | None = None, spread: bool | None = None
    ) -> list[Hit]:
        pool = [chunk for doc in docs for chunk in self.chunks(doc)]
        retriever = make_retriever(self.settings.retriever, pool)
        k = top_k or self.settings.top_k
        spread = self.settings.spread if spread is None else spread
        hits = search(retriever, query, k, self.rng, spread=spread)
        self.last_hits = hits
        for hit in hits:
            self.trace.read(hit.chunk.full_text)
        self.trace.step(
            "search",
            retriever=retriever.name,
            top_k=k,
            spread=spread,
            query=query[:200],
            documents=len(docs),
            hits=[
                {"path": h.chunk.path, "clause": h.chunk.clause, "score": round(h.score, 3)}
                for h in hits
            ],
        )
        return hits

    def best_in(self, doc: Document, query: str, accept, prefer=None) -> Chunk | None:
        """The chunk of `doc` that `accept`s and best matches `query`; chunks that `prefer`
        accepts (e.g. those stating the value asked for) come first."""
        candidates = [c for c in self.chunks(doc) if accept(c)]
        if not candidates:
            return None
        retriever = make_retriever(self.settings.retriever, candidates)
        scores = retriever.scores(query)
        preferred = [bool(prefer(c)) if prefer else True for c in candidates]
        ranked = sorted(zip(preferred, scores, range(len(candidates)), strict=True), reverse=True)
        return candidates[ranked[0][2]]

    # --- linking a question to documents ----------------------------------------------------
    def link(self, text: str, docs: list[Document] | None = None) -> list[Document]:
        """Documents the text names (by counterparty, person, role or file name), best first."""
        return [doc for _, doc in self.link_scores(text, docs)]

    def link_scores(
        self, text: str, docs: list[Document] | None = None
    ) -> list[tuple[float, Document]]:
        docs = self.readable if docs is None else docs
        aliases = {d.path: self._aliases(d) for d in docs}
        frequency: dict[str, int] = {}
        for words in aliases.values():
            for word in words:
                frequency[word] = frequency.get(word, 0) + 1
        asked = set(tokens(text, stem=True)) | _abbreviations(text)
        scored = []
        for doc in docs:
            score = sum(math.log(1 + len(docs) / frequency[w]) for w in asked & aliases[doc.path])
            if score > 0:
                primary = doc.doc_type in CONTRACT_TYPES or doc.doc_type == "employment"
                scored.append((score, primary, doc.date, doc))
        scored.sort(key=lambda item: item[:3], reverse=True)
        self.trace.step("link", candidates=[(d.path, round(s, 2)) for s, _, _, d in scored[:5]])
        return [(score, doc) for score, _, _, doc in scored]

    def _aliases(self, doc: Document) -> set[str]:
        own = {self.matter.database.value("client"), self.matter.database.value("target")}
        own_words = {w for name in own if name for w in tokens(name, stem=True)}
        names = " ".join([Path(doc.path).stem.replace("-", " "), doc.counterparty, doc.title])
        words = set(tokens(names, stem=True)) | _abbreviations(doc.title, initials=True)
        return {w for w in words if w not in GENERIC and w not in own_words and not w.isdigit()}

    # --- citing -----------------------------------------------------------------------------
    def cite(self, answer: Answer, doc: Document) -> str:
        if doc.path not in answer.sources:
            answer.sources.append(doc.path)
        return f"[{answer.sources.index(doc.path) + 1}]"


def _abbreviations(text: str, initials: bool = False) -> set[str]:
    """CEO/CFO/CTO and friends, both ways: titles give their initials, questions give the words."""
    found = set()
    for abbreviation, words in ROLES.items():
        if initials and words in text.lower():
            found.add(abbreviation)
        if not initials and re.search(rf"\b{abbreviation}\b", text.lower()):
            found.add(abbreviation)
        if not initials and words in text.lower():
            found.add(abbreviation)
    return found


ROLES = {
    "ceo": "chief executive officer",
    "cfo": "chief financial officer",
    "cto": "chief technology officer",
}
