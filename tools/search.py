"""Full-text search over every wiki page (a source page with its document's whole text, ``fulltext``): SQLite FTS5
(standard library), BM25 with page-type weights. The index, ``.tools-cache/search.sqlite``, is brought up to date on
each search: pages whose size or mtime changed re-read, vanished ones dropped (4,000 pages: a first build of a few
seconds, then a stat per page). Title, frontmatter, prose and paths are columns weighted 10 : 4 : 1 : 0.1: paths and
link targets (a codebase page's "where it appears" lists) are apart, so a ``pipelines/`` folder does not rank a page
for "pipeline parallelism". The page type scales the score: a concept or source page is not buried under a long
codebase page that mentions a word once. The index is not stemmed (``Optional`` and ``options`` stay apart); a query
word also matches its plural, ``-ing``/``-ed`` forms (``shard`` finds ``sharding``). Pages holding more of the words,
and rarer ones, rank first (BM25)."""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from . import fulltext, wikiscan
from .errors import InputError
from .project import Project

SCHEMA = 9  # 7: indexes built by parallel searches could hold a page twice; 9: sources' whole text
TYPE_WEIGHT = {"concept": 1.6, "source": 1.5, "analysis": 1.3, "kernel": 1.2, "hypothesis": 1.1, "model": 1.1,
               "experiment": 1.0, "observation": 1.0, "codebase": 0.9, "loop": 1.0, "index": 0.3, "log": 0.2}
STOP = frozenset("a an and are as at be by can do does for from how i in is it of on or that the this to what when "
                 "where which who why with did will would should could my our your their its".split())
MODULE_WEIGHT = 0.6  # codebase module pages: long symbol tables
DOC_WEIGHT = 0.1  # a source's whole text (bench/search_quality.py: at the prose's weight, it crowded out the rest)


@dataclass
class Hit:
    path: str
    title: str
    type: str | None
    score: float
    snippet: str

    def as_dict(self) -> dict:
        return {"path": self.path, "title": self.title, "type": self.type, "score": self.score,
                "snippet": self.snippet}


def _index(project: Project) -> Path:
    """``.tools-cache/search.sqlite``, refused where a link takes it or its folder out of the knowledge base: a
    search (an agent's read) rewrites the index, and would rewrite whatever database such a link names."""
    db = project.safe_cache() / "search.sqlite"
    for p in (db, db.with_name(db.name + "-journal")):
        if p.is_symlink():
            raise InputError(p, "a link; the search index is not written through it")
    return db


def _connect(project: Project) -> sqlite3.Connection:
    path = _index(project)
    try:
        return _open(path)
    except sqlite3.DatabaseError as e:  # not a database, or a journal it cannot use: the index is disposable
        raise InputError(path, f"the search index cannot be opened ({e}); delete {path.name}* and search again") \
            from None


def _open(path: Path) -> sqlite3.Connection:
    """The index, its tables made under a write lock (agents search in parallel: two processes that both found
    no tables once dropped each other's). Transactions are explicit (``isolation_level=None``)."""
    db = sqlite3.connect(path, timeout=120, isolation_level=None)
    if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
        with db:
            db.execute("BEGIN IMMEDIATE")
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:  # another process may have made them
                db.execute("DROP TABLE IF EXISTS pages")
                db.execute("DROP TABLE IF EXISTS docs")
                db.execute("CREATE TABLE pages (rel TEXT PRIMARY KEY, mtime INTEGER, size INTEGER, type TEXT, "
                           "title TEXT, weight REAL)")
                db.execute("CREATE VIRTUAL TABLE docs USING fts5(rel UNINDEXED, title, meta, body, paths, doc, "
                           "text UNINDEXED, tokenize='unicode61')")
                db.execute(f"PRAGMA user_version = {SCHEMA}")
    return db


def _meta_text(meta: dict) -> str:
    out = []
    for k, v in meta.items():
        if k in ("created", "updated", "commit"):
            continue
        out.append(v if isinstance(v, str) else json.dumps(v, default=str))
    return " ".join(out)


def _weight(p: wikiscan.WikiPage) -> float:
    t = (p.meta or {}).get("type")
    tags = (p.meta or {}).get("tags") or []
    if t == "codebase" and isinstance(tags, list) and "module" in tags:
        return MODULE_WEIGHT
    return TYPE_WEIGHT.get(t if isinstance(t, str) else "", 1.0)


def refresh(project: Project, db: sqlite3.Connection | None = None) -> dict:
    """Bring the index up to date with wiki/; returns counts (added, updated, removed, unchanged)."""
    own = db is None
    db = db or _connect(project)
    root = project.wiki
    md, _, _ = wikiscan.walk(root, [])
    counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0}
    seen = set()
    base = os.fspath(root) + os.sep  # a string join per page: pathlib's costs more than the stat itself
    with db:
        # what the index holds, read under the write lock: parallel searches each added the pages they had not
        # seen indexed, and the index held them twice, for good
        db.execute("BEGIN IMMEDIATE")
        known = {rel: (m, s) for rel, m, s in db.execute("SELECT rel, mtime, size FROM pages")}
        for rel in md:
            try:
                st = os.stat(base + rel)
            except OSError:
                continue
            seen.add(rel)
            sig = (st.st_mtime_ns, st.st_size)
            if rel.startswith("sources/"):  # a source page is indexed with its document's text: either may change
                sig = fulltext.signature(project, rel, sig)
            if known.get(rel) == sig:
                counts["unchanged"] += 1
                continue
            p = wikiscan.read_page(root / rel, rel, links=False, within=root)
            if rel in known:
                db.execute("DELETE FROM docs WHERE rel = ?", (rel,))
                counts["updated"] += 1
            else:
                counts["added"] += 1
            meta = p.meta or {}
            ptype = meta.get("type") if isinstance(meta.get("type"), str) else None
            db.execute("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?, ?)",
                       (rel, sig[0], sig[1], ptype, p.title, _weight(p)))
            doc = fulltext.whole(project, rel) if ptype == "source" else ""  # low weight: long, about much
            prose, paths = split_paths(p.body or "")
            meta_words, meta_paths = split_paths(_meta_text(meta))  # path:, vendored_from: are places too
            db.execute("INSERT INTO docs (rel, title, meta, body, paths, doc, text) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (rel, p.title, meta_words, prose, f"{meta_paths} {paths}", doc, f"{p.body or ''}\n\n{doc}"))
        for rel in set(known) - seen:
            db.execute("DELETE FROM docs WHERE rel = ?", (rel,))
            db.execute("DELETE FROM pages WHERE rel = ?", (rel,))
            counts["removed"] += 1
    if own:
        db.close()
    return counts


# a link target ends at the next bracket too: a page of "[a](" repeated never rescans to its end from each "]("
_LINK_TARGET = re.compile(r"\]\((?:[^()\[\]\s]|\([^()\[\]\s]*\))*\)")  # one level of (): a_(computing)
# A file path as pages write it: a/b/c.py, `pkg/ops/`, k.py:120
# (a path starts a token: never inside a run of dashes or dots, which made a line of 50,000 dashes take 148 s)
_PATH = re.compile(r"(?<![\w/.-])[\w.-]*(?:/[\w.-]+)+/?(?::\d+)?|(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\."
                   r"(?:py|ipynb|ya?ml|json|md|toml|cc|cpp|h|sh|txt|tsv)(?::\d+)?\b")


_REFERENCE_REGION = re.compile(r"<!-- tools:begin (appears-[\w.-]+|sources) -->(.*?)<!-- tools:end \1 -->", re.S)


def split_paths(body: str) -> tuple[str, str]:
    """(prose, paths): link targets dropped, file paths moved to their own column, and so are the generated
    "where it appears" lists of a concept page (code names and places) and its quotes of the sources' claims
    (each source page holds its own)."""
    lists = [m.group(2) for m in _REFERENCE_REGION.finditer(body)]
    body = _REFERENCE_REGION.sub(" ", body)
    body = _LINK_TARGET.sub("]", body)
    paths = _PATH.findall(body)
    return _PATH.sub(" ", body), " ".join(paths + [_LINK_TARGET.sub("]", x) for x in lists])


SYNONYMS: dict[str, list[str]] = yaml.safe_load(
    resources.files("tools").joinpath("data/search_synonyms.yaml").read_text(encoding="utf-8"))


def variants(word: str) -> list[str]:
    """A query word, its plural, -ing and -ed forms (a light stem: identifiers like ``Optional`` are not folded
    into ``options`` as a stemmer would), and the other spellings engineers write for it (``backward``: ``bwd``,
    ``vjp``; tools/data/search_synonyms.yaml)."""
    if len(word) < 3:  # `C`, `K`, `tp`: the word itself (its "plurals" would be other words: b -> bs, bed)
        return list(dict.fromkeys([word] + SYNONYMS.get(word, [])))
    base = word
    for suffix in ("ies", "ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix) and not word.endswith("ss"):
            base = word[: -len(suffix)]
            break
    out = [word, base, base + "s", base + "es", base + "ing", base + "ed"]
    if word.endswith("ies"):  # queries -> query
        out.append(base + "y")
    elif base != word:  # shapes, shaping, shaped -> shape; caches -> cache
        out.append(base + "e")
    if base.endswith("e"):
        out += [base[:-1] + "ing", base + "d"]
    out += SYNONYMS.get(word, []) + SYNONYMS.get(base, [])
    return list(dict.fromkeys(x for x in out if len(x) > 1))


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


MAX_WORDS = 32  # distinct words of a query looked for; the rest are left out


def query_groups(text: str) -> list[list[str]]:
    """The query as groups of alternatives, one group per word (stop words out unless nothing else is left): a
    word's variants, and for a CamelCase word (``RMSNorm``) its parts as a phrase (``rms norm``), as code and
    pages spell it (``rms_norm``)."""
    raw = re.findall(r"[^\W_]+", text)
    kept = [w for w in raw if w.lower() not in STOP] or raw
    # the parts of a code name are not expanded: `pallas_call` asks for "call", not "calls" or "calling" (a
    # docstring's "Calls the function" would outweigh every page that holds the name, "call" being on most of them)
    named = {part for name in identifiers(text) for part in re.findall(r"[^\W_]+", name)}
    out, seen = [], set()
    for w in kept:
        low = w.lower()
        if low in seen:
            continue
        if len(out) == MAX_WORDS:  # each word is a query of the index: 64,000 words took 17 s, growing as their square
            break
        seen.add(low)
        group = [low] if low in named else variants(low)
        parts = _CAMEL.sub(" ", w).lower()
        if " " in parts:
            group.append(parts)
        out.append(group)
    return out


def _expr(group: list[str]) -> str:
    return "(" + " OR ".join('"' + v.replace('"', "") + '"' for v in group) + ")"


def fts_query(text: str) -> str | None:
    """The user's words as an FTS5 query: each word quoted (no operator from the input is ever interpreted),
    with its variants; any may match; BM25 ranks pages holding more of them, and rarer ones, first."""
    groups = query_groups(text)
    return " OR ".join(_expr(g) for g in groups) if groups else None


COVER_FLOOR = 0.4  # a page holding one of four words keeps 0.44 of its score, one holding all keeps all
CANDIDATES = 60
TITLE_BONUS = 0.5  # a page whose title holds every word scores half as much again


def _weights(db: sqlite3.Connection, groups: list[list[str]]) -> list[float]:
    """How much each word says: log(N / pages holding it), so "kernel" on most pages weighs little and
    "rmsnorm" much (one count per word on the index)."""
    (n,) = db.execute("SELECT count(*) FROM pages").fetchone()
    out = []
    for g in groups:
        (df,) = db.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", ["{title meta body} : " + _expr(g)]).fetchone()
        out.append(math.log((n + 1) / (df + 0.5)) if df else 0.0)  # a word on no page (a typo) says nothing
    return out


def _coverage(db: sqlite3.Connection, groups: list[list[str]], weights: list[float], rels: list[str],
              columns: str = "{title meta body}") -> dict[str, float]:
    """For each candidate page, the weighted share of the query's words it holds in ``columns`` (by default its
    title, frontmatter or prose; file paths do not count): one indexed query per word over the candidates."""
    held = dict.fromkeys(rels, 0.0)
    marks = ",".join("?" * len(rels))
    for g, w in zip(groups, weights):
        for (rel,) in db.execute(f"SELECT rel FROM docs WHERE docs MATCH ? AND rel IN ({marks})",
                                 [f"{columns} : " + _expr(g), *rels]):
            held[rel] += w
    total = sum(weights) or 1.0
    return {rel: h / total for rel, h in held.items()}


_TOKEN = re.compile(r"[\w.]+")  # a code name's parts with their joins


def identifiers(query: str) -> list[str]:
    """The code names in a query (parts joined by ``_`` or ``.``: ``pallas_call``, ``jax.lax.scan``; not ``Wan2.2``,
    ``e.g`` or a sentence's full stop): the tokenizer splits them into words, so a page holding
    ``pallas_call_registration`` or repeating ``pallas`` looks to BM25 like one holding ``pallas_call``. Linear:
    a token at a time, no pattern that backtracks over a long run of letters."""
    out = []
    for tok in _TOKEN.findall(query):
        tok = tok.strip("._").lower()
        if "_" not in tok and "." not in tok:
            continue
        dotted = tok.split(".")
        if "." in tok and not all(len(p) >= 2 and p[0].isalpha() for p in dotted[1:]) or len(dotted[0]) < 2 \
                or any(not p for p in dotted) or any(not part for p in dotted for part in p.split("_")):
            continue
        out.append(tok)
    return list(dict.fromkeys(out))


def _exact(db: sqlite3.Connection, names: list[str], rels: list[str]) -> dict[str, float]:
    """For each candidate page, the share of the query's code names it holds as whole names (not inside a longer
    one: ``pallas_call`` is not in ``interpret_pallas_call``), in its title, frontmatter or prose."""
    if not names:
        return dict.fromkeys(rels, 1.0)
    pats = [re.compile(r"(?<!\w)" + re.escape(n) + r"(?![\w]|\.\w)", re.I) for n in names]  # pl.pallas_call holds it
    out = dict.fromkeys(rels, 0.0)
    marks = ",".join("?" * len(rels))
    for rel, title, meta, body in db.execute(f"SELECT rel, title, meta, body FROM docs WHERE rel IN ({marks})",
                                             rels):
        text = " ".join(x or "" for x in (title, meta, body))
        out[rel] = sum(bool(p.search(text)) for p in pats) / len(pats)
    return out


_KEBAB = re.compile(r"(?<![\w-])[^\W_]{2,}(?:-[^\W_]{2,})+(?![\w-])")


def _named(rows: list[tuple], names: list[str], query: str = "") -> dict[str, float]:
    """For each candidate page, the share of the query's code names that name the page itself: its title is the
    name, or ends with it as a module path's last part (``layer_norm``'s kernel page before ``layer_norm_forward``'s,
    ``jax._src.pallas.pallas_call`` for ``pallas_call``). A command's kebab-case name (``describe-instances``) names
    a page that way too: its title is it, or ends with it (``ec2 describe-instances``, fifth behind pages that only
    repeated its words); such a name is not asked for whole in the text, where ``all-gather`` is also
    ``all_gather``."""
    kebab = [k.lower() for k in _KEBAB.findall(query)]
    names = list(names) + [k for k in kebab if k not in names]
    if not names:
        return {r[0]: 0.0 for r in rows}
    out = {}
    for rel, title, *_ in rows:
        t = str(title or "").lower().strip()
        out[rel] = sum(t == n or t.endswith(("." + n, "/" + n)) or (n in kebab and t.endswith(" " + n))
                       for n in names) / len(names)
    return out


def rerank(db: sqlite3.Connection, groups: list[list[str]], rows: list[tuple], names: list[str] = (),
           query: str = "") -> list[tuple]:
    """BM25 adds up words, so a page that repeats one of the question's words can beat one that holds them all:
    each candidate's score is scaled by the share of the words it holds (each word weighed by how rare it is),
    and raised by the share its title holds (the page about ``rms_norm`` for "fused RMSNorm kernel"). Pages holding
    more of the query's code names (``names``) whole come first, as grep would have them: one calling
    ``pallas_call`` before one repeating ``pallas`` and holding ``interpret_pallas_call``; among them, the page the
    name names (its title) first."""
    rels = [r[0] for r in rows]
    weights = _weights(db, groups)
    cover = _coverage(db, groups, weights, rels) if len(groups) > 1 else dict.fromkeys(rels, 1.0)
    titled = _coverage(db, groups, weights, rels, "{title}")
    exact = _exact(db, list(names), rels)
    named = _named(rows, list(names), query)
    scored = [(rel, t, ty, s * (COVER_FLOOR + (1 - COVER_FLOOR) * cover[rel] ** 2) * (1 + TITLE_BONUS * titled[rel]))
              for rel, t, ty, s in rows]
    return sorted(scored, key=lambda r: (-exact[r[0]], -named[r[0]], -r[3], r[0]))


def search(project: Project, query: str, type: str | None = None, limit: int = 10) -> tuple[int, list[Hit]]:
    """(number of pages matching any word, the best ``limit`` of them)."""
    q = fts_query(query)
    if q is None:
        return 0, []
    db = _connect(project)
    try:
        refresh(project, db)
    except sqlite3.DatabaseError as e:  # locked past the timeout, a disk error: said, not a traceback
        db.close()
        raise InputError(_index(project), f"the search index cannot be brought up to date ({e})") from None
    try:
        where = "docs MATCH ?" + (" AND p.type = ?" if type else "")
        args: list = [q] + ([type] if type else [])
        join = "FROM docs JOIN pages p ON p.rel = docs.rel"
        (total,) = db.execute(f"SELECT count(*) {join} WHERE {where}", args).fetchone()
        score = f"-bm25(docs, 0.0, 10.0, 4.0, 1.0, 0.1, {DOC_WEIGHT}, 0.0) * p.weight"
        rows = db.execute(f"SELECT docs.rel, p.title, p.type, {score} AS score {join} WHERE {where} "
                          "ORDER BY score DESC, docs.rel LIMIT ?", [*args, max(limit, CANDIDATES)]).fetchall()
        ranked = rerank(db, query_groups(query), rows, identifiers(query), query)[:limit] if rows else []
        texts = dict(db.execute(f"SELECT rel, text FROM docs WHERE rel IN ({','.join('?' * len(ranked))})",
                                [r[0] for r in ranked]).fetchall()) if ranked else {}
    finally:
        db.close()
    words = [w for g in query_groups(query) for w in g[:1]]
    return total, [Hit(r, t, ty, round(s, 4), snippet(texts.get(r) or "", words)) for r, t, ty, s in ranked]


SNIPPET_CHARS = 160


def _words(text: str) -> list[str]:
    """The words FTS5's tokenizer sees: letters and digits (``dimension_semantics`` is two words)."""
    return re.findall(r"[^\W_]+", text.lower())


_NOISE = re.compile(r"<!--(?:(?!<!--).)*?-->|\]\((?:[^()\[\]\s]|\([^()\[\]\s]*\))*\)"
                    r"|^\|?(?:\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*$", re.M)


def readable(text: str) -> str:
    """``text`` without the markup a reader does not see: link targets, comments, table rules."""
    return _NOISE.sub(lambda m: "]" if m.group(0).startswith("]") else "", text).strip()


def snippet(body: str, words: list[str], width: int = SNIPPET_CHARS) -> str:
    """The passage around the first query word in ``body`` that is not part of a file path, the words in bold,
    without markup a reader does not see (link targets, comments, table rules). Linear in the page's size
    whatever the number of words (FTS5's own snippet() took 53 s on a 1 MB page for five words): one pass for
    the hits (a word or its forms: its first five letters), then work on ``width`` characters."""
    stems = sorted({w[:5] if len(w) > 5 else w for w in words}, key=len, reverse=True)
    if not stems:
        return ""
    body = readable(body)
    pat = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in stems) + r")\w*", re.I)
    first = None
    for n, m in enumerate(pat.finditer(body)):
        if first is None:
            first = m
        before, after = body[m.start() - 1:m.start()], body[m.end():m.end() + 1]
        if before not in ("/", ".", "_") and after not in ("/", ".", "_") or n >= 200:
            first = m
            break
    start = max(0, (first.start() if first else 0) - width // 3)
    window = body[start:start + width]
    if start:
        window = window.split(" ", 1)[-1]
    text = " ".join(window.replace("**", "").split())
    text = pat.sub(lambda h: f"**{h.group(0)}**", text)
    return ("… " if start else "") + text + (" …" if start + width < len(body) else "")
