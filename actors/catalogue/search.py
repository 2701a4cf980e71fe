"""Fielded BM25 ranking of catalogue tools, blended with a ranking of their servers, and the
query widened once with the words of its best matches (pseudo-relevance feedback)."""
from __future__ import annotations

import heapq
from array import array
import math
from collections import Counter
from typing import Callable, cast

from actors.catalogue.terms import terms
from actors.slicing import never

K1, B = 1.2, 0.75
# Field weights (BM25F-style: a weighted bag per tool, one length norm). A query word in the
# tool's own name says most; a parameter's name or description says less than the description.
FIELDS = {"name": 3.0, "title": 2.0, "description": 1.0, "params": 0.5, "server": 1.0}
# Share of a tool's score that comes from its server's score: a task worded in the server's
# vocabulary ("a deep report") reaches tools whose own text misses those words.
SERVER_SHARE = 0.5
# Pseudo-relevance feedback: the words that the best FEEDBACK_TOOLS matches share (the FEEDBACK_TERMS
# strongest, each at most FEEDBACK_WEIGHT of a query word) re-rank the best FEEDBACK_POOL, so the
# tools that sit beside the ones a task's words matched move up. Re-ranking only the pool costs
# ~0.1 ms at 10,000 tools; scoring the whole index with the added words cost 5x the first pass for
# +0.01 recall@10. Chosen on half of LiveMCPBench's tasks, checked on the other half (search_eval).
FEEDBACK_TOOLS, FEEDBACK_TERMS, FEEDBACK_WEIGHT, FEEDBACK_POOL = 10, 10, 0.3, 50
# A server's instructions are its own unpinned words: indexed up to here, and only in its server's
# text (one field among many), so a long or keyword-stuffed one cannot carry its tools far.
INSTRUCTIONS_CHARS = 2000
# A tool's own description and parameter text are indexed up to here: what search needs is in the
# first pages, and a megabyte description must not cost the index (built in one slice per tool)
# half a second.
FIELD_CHARS = 16_000


def fields(entry, instructions: str = "") -> dict[str, str]:
    """A catalogue Entry's searchable text, per field; `instructions` are its server's (from its
    initialize result, Catalogue.instructions)."""
    d = entry.definition
    props = ((d.get("inputSchema") or {}).get("properties") or {})
    params = " ".join(f"{k} {v.get('description', '') if isinstance(v, dict) else ''}" for k, v in props.items())
    description = (d.get("description") or "")[:FIELD_CHARS]
    return {"name": entry.original, "title": d.get("title") or "", "description": description,
            "params": params[:FIELD_CHARS], "server": entry.server, "instructions": instructions[:INSTRUCTIONS_CHARS],
            "key": entry.name}


def bag(doc: dict[str, str]) -> dict[str, float]:
    """A doc's words, each weighted by the fields it appears in (FIELDS)."""
    words = cast("dict[str, float]", Counter())  # float weights: the stub says Counter counts ints
    for field, weight in FIELDS.items():
        for t in terms(doc.get(field, "")):
            words[t] += weight
    return words


def _bm25(bags: list[dict[str, float]], between: Callable[[], None] = never) -> dict[str, tuple]:
    """Per term: doc ids and each doc's BM25 term weight (idf applied at query time)."""
    return _weights(bags, between)[0]


def _weights(bags: list[dict[str, float]], between: Callable[[], None] = never
             ) -> tuple[dict[str, tuple], list[dict[str, float]]]:
    """The postings of `_bm25`, and the same weights per doc (term → weight); `between()` runs
    after each doc."""
    lengths = [sum(b.values()) or 1.0 for b in bags]
    avg = (sum(lengths) / len(lengths)) if lengths else 1.0
    postings: dict[str, tuple] = {}
    per_doc: list[dict[str, float]] = []
    for i, bag in enumerate(bags):
        between()
        norm = K1 * (1 - B + B * lengths[i] / avg)
        mine = {}
        for term, tf in bag.items():
            ids, weights = postings.setdefault(term, ([], []))
            ids.append(i)
            weights.append(mine.setdefault(term, tf * (K1 + 1) / (tf + norm)))
        per_doc.append(mine)
    # As arrays: the same reads, a third of the memory, and nothing for the garbage collector to
    # walk (a list is always tracked: 10,000 tools made 80,000 of them, and each full collection
    # walked them all while every other greenlet waited).
    packed: dict[str, tuple] = {}
    for term, (ids, weights) in postings.items():
        between()
        packed[term] = (array("l", ids), array("d", weights))
    return packed, per_doc


def _score(postings: dict[str, tuple], size: int, query: dict[str, float],
           scores: dict[int, float] | None = None) -> dict[int, float]:
    """BM25 of every doc holding a query term (each term counted at its weight), added to `scores`.
    Terms in sorted order: the same sums, to the last bit, whatever the process's hash seed."""
    scores = {} if scores is None else scores
    for term in sorted(query):
        posting = postings.get(term)
        if not posting:
            continue
        ids, weights = posting
        idf = query[term] * math.log(1 + (size - len(ids) + 0.5) / (len(ids) + 0.5))
        if not scores:  # the first term builds the map in C
            scores = dict(zip(ids, [idf * w for w in weights]))
            continue
        get = scores.get
        for i, w in zip(ids, weights):
            scores[i] = get(i, 0.0) + idf * w
    return scores


class Index:
    """Built once per catalogue snapshot from each tool's `fields`; a query touches only the
    tools and servers that hold one of its terms. Deterministic and stateless per query.
    `between()` runs after each doc of each pass (a slicing.Slices yields to the hub there)."""

    def __init__(self, docs: list[dict[str, str]], between: Callable[[], None] = never):
        self.size = len(docs)
        bags = []
        lent: list[tuple] = []
        server_of: list[int] = []
        server_ids: dict[str, int] = {}
        server_bags: list[Counter] = []
        length = 0.0
        for doc in docs:
            between()
            words = bag(doc)
            bags.append(words)
            total = sum(words.values()) or 1.0
            length += total
            # What this tool lends a query that ranks it near the top: its words by share of its text.
            lent.append(tuple((t, w / total) for t, w in words.items()))
            sid = server_ids.setdefault(doc.get("server", ""), len(server_ids))
            if sid == len(server_bags):  # first tool of its server: the server's name and instructions
                server_bags.append(Counter(terms(f"{doc.get('server', '')} {doc.get('instructions', '')}")))
            server_of.append(sid)
            # A server's text is its tools' names and descriptions, each word counted once per tool
            # so one verbose tool does not speak for the server.
            server_bags[sid].update(set(terms(f"{doc.get('name', '')} {doc.get('description', '')}")))
        self.postings, self.doc_weights = _weights(bags, between)
        self.server_postings = _bm25(cast("list[dict[str, float]]", server_bags), between)
        self.servers = len(server_bags)
        self.average_length = length / len(docs) if docs else 1.0
        self.server_of = server_of
        self.lent = lent
        # Each doc's position in name order, for a cheap deterministic tie-break.
        order = sorted(range(len(docs)), key=lambda i: docs[i].get("key", docs[i].get("name", "")))
        self.name_rank = [0] * len(docs)
        for rank, i in enumerate(order):
            self.name_rank[i] = rank

    def score(self, query: str) -> dict[int, float]:
        """Every matching tool's score for `query`; a pure function of the index and the query."""
        words = dict.fromkeys(terms(query), 1.0)
        scores = _score(self.postings, self.size, words)
        if not scores:
            return scores
        by_server = _score(self.server_postings, self.servers, words) if self.servers > 1 else {}
        first = self._blend(scores, by_server)
        pool = self._best(first)
        wider = self._feedback(first, pool[:FEEDBACK_TOOLS], words)
        # The added words only raise the pool's scores: every tool outside it stays below.
        for term in sorted(wider):
            ids = self.postings[term][0]
            idf = wider[term] * math.log(1 + (self.size - len(ids) + 0.5) / (len(ids) + 0.5))
            for i in pool:
                weight = self.doc_weights[i].get(term)
                if weight:
                    first[i] += idf * weight
        return first

    def score_apart(self, query: str, bags) -> list[float]:
        """Each of `bags` (`bag` of a doc not in the index: troupe's own tools, which depend on who
        asks) scored for `query` as the index would score it, with the index's word weights and
        average length; they change nothing in the index. Only the first pass: no server blend, no
        feedback words, so such a doc ranks at or below where the same text inside the index would."""
        words = sorted(dict.fromkeys(terms(query)))
        out = []
        for doc in bags:
            norm = K1 * (1 - B + B * (sum(doc.values()) or 1.0) / self.average_length)
            score = 0.0
            for term in words:
                tf = doc.get(term)
                if not tf:
                    continue
                posting = self.postings.get(term)
                held = len(posting[0]) if posting else 0
                score += math.log(1 + (self.size - held + 0.5) / (held + 0.5)) * tf * (K1 + 1) / (tf + norm)
            out.append(score)
        return out

    def _best(self, scores: dict[int, float]) -> list[int]:
        """The FEEDBACK_POOL best tools, ties by name: a cut found by a sort of bare floats (in C),
        then only the few above it ordered with their names."""
        cut = sorted(scores.values(), reverse=True)[:FEEDBACK_POOL][-1]
        rank = self.name_rank
        above = sorted((-s, rank[i], i) for i, s in scores.items() if s >= cut)
        return [i for _, _, i in above[:FEEDBACK_POOL]]

    def _blend(self, scores: dict[int, float], by_server: dict[int, float]) -> dict[int, float]:
        top = max(by_server.values(), default=0.0)
        if top <= 0:
            return scores
        # Normalised so the server's part never outweighs the tool's own best match.
        scale = SERVER_SHARE * max(scores.values()) / top
        of = self.server_of
        return {i: s + scale * by_server.get(of[i], 0.0) for i, s in scores.items()}

    def _feedback(self, scores: dict[int, float], best: list[int], query: dict[str, float]) -> dict[str, float]:
        """The words the `best` matches share, weighted by their share of each tool's text and by how
        well the tool matched; words of the query itself are already counted."""
        lead = scores[best[0]]
        lent: dict[str, float] = {}
        for i in best:
            share = scores[i] / lead
            for term, weight in self.lent[i]:
                lent[term] = lent.get(term, 0.0) + weight * share
        for term in query:
            lent.pop(term, None)
        strongest = heapq.nsmallest(FEEDBACK_TERMS, lent.items(), key=lambda kv: (-kv[1], kv[0]))
        if not strongest:
            return {}
        top = strongest[0][1]
        return {term: FEEDBACK_WEIGHT * weight / top for term, weight in strongest}
