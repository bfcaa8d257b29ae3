"""Text an LLM writes from given spans, where every sentence cites the spans it rests on.

The spans (passages of wiki pages, pages or sections of a source) go to the model numbered ``S1``, ``S2``, ... in a
cached context block; the model must answer through one forced tool call, a list of ``{text, cites}``. A sentence
whose cites name no given span is dropped, never shown: what is left can be checked against the spans it names.
A reply that is not a usable call gets one repair round with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import Conversation, LLMError, Provider, Round, Tool, Usage

TOOL_NAME = "cited_sentences"
SCHEMA = {
    "type": "object",
    "properties": {"sentences": {"type": "array", "items": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "one sentence"},
                       "cites": {"type": "array", "items": {"type": "string"},
                                 "description": "ids of the spans it rests on, e.g. [\"S2\"]"}},
        "required": ["text", "cites"], "additionalProperties": False}}},
    "required": ["sentences"], "additionalProperties": False,
}


@dataclass
class Span:
    id: str        # S1, S2, ...
    cite: str      # how a reader finds it: "wiki/concepts/remat.md § When", "p. 3"
    text: str


@dataclass
class Cited:
    sentences: list[dict]                # {"text", "cites": [span ids]}
    dropped: list[str]                   # sentences that cited nothing given
    usage: Usage = field(default_factory=Usage)
    responses: list[dict] = field(default_factory=list)   # raw response bodies, for the record


def spans_block(spans: list[Span]) -> str:
    return "\n\n".join(f"[{s.id}] ({s.cite})\n{s.text}" for s in spans)


def _check(inp: dict | None, ids: set[str]) -> tuple[list[dict], list[str], str]:
    """(kept sentences, dropped sentences, why the reply is unusable or "")."""
    if not isinstance(inp, dict) or not isinstance(inp.get("sentences"), list):
        return [], [], "the call must carry {\"sentences\": [{\"text\": ..., \"cites\": [...]}]}"
    kept, dropped = [], []
    for s in inp["sentences"]:
        if not isinstance(s, dict) or not str(s.get("text") or "").strip():
            continue
        text = " ".join(str(s["text"]).split())
        cites = [c for c in dict.fromkeys(str(c).strip() for c in (s.get("cites") or [])) if c in ids]
        (kept if cites else dropped).append({"text": text, "cites": cites} if cites else text)
    if not kept:
        return [], dropped, "no sentence cited a given span (cite them by id: S1, S2, ...)"
    return kept, dropped, ""


def write(provider: Provider, system: str, spans: list[Span], ask: str, max_tokens: int = 1500) -> Cited:
    """Ask for cited sentences over ``spans``; raises LLMError when the model gives none twice."""
    if not spans:
        raise LLMError("nothing to cite: no spans were given")
    ids = {s.id for s in spans}
    tool = Tool(TOOL_NAME, "Give the answer as sentences, each citing the spans (by id) it rests on.", SCHEMA)
    conv = Conversation(system + "\n\nEvery sentence must cite at least one span by its id; a sentence that "
                                 "cites nothing is discarded. Use only what the spans say.",
                        [spans_block(spans)], ask)
    out = Cited([], [])
    for _ in range(2):
        reply = provider.call(conv, tool, max_tokens)
        out.usage = out.usage + reply.usage
        out.responses.append(reply.response)
        kept, dropped, why = _check(reply.call.input if reply.call else None, ids)
        out.dropped += dropped
        if not why:
            out.sentences = kept
            return out
        conv.rounds.append(Round(reply.call, reply.text, why))
    raise LLMError(f"the model gave no usable cited sentences twice: {why}")
