"""The LLM proposer: priors → prompt (built by code, cached) → one forced tool call → a validated Proposal.

A malformed proposal gets one repair round trip with the validation error; a duplicate (tried or refuted
fingerprint) gets one retry saying so and is then returned anyway (the engine refuses it with the page that refuted
it). Before each request the token and cost budgets are checked against an estimate. Every prompt and response is
saved through ``record``; the key is read from the environment and never written.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from ... import llm
from ...errors import ToolsError
from .. import admission
from ..priors import Attempt, Priors
from ..prompt import (TOOL_DESCRIPTION, TOOL_NAME, duplicate_feedback, render, repair_feedback, tool_input_to_dict,
                      tool_schema)
from ..proposal import Proposal, ProposalError
from ..spec import LoopSpec
from . import BudgetExhausted, Proposer, RecordFn

DEFAULT_MODEL = llm.DEFAULT_MODELS["anthropic"]
MODEL_SET = ("proposer", "hypothesis_page", "usage", "repeats")  # fields the loop sets, not the model


class MalformedProposal(ProposalError, ToolsError):
    """The model's proposal failed validation twice (the first error was sent back for one repair)."""

    def __init__(self, errors: list[str], usage: dict):
        self.errors = errors
        self.usage = usage
        super().__init__("the LLM proposed an unusable proposal twice: " + "; then: ".join(errors))


class LLMProposer(Proposer):
    name = "llm"

    def __init__(self, provider: str = "anthropic", model: str = DEFAULT_MODEL, base_url: str | None = None,
                 max_tokens: int = 2048, price_in_per_mtok: float = 5.0, price_out_per_mtok: float = 25.0,
                 max_retries: int = 2, api_key_env: str | None = None, cache_write_factor: float = 1.25,
                 cache_read_factor: float = 0.1, count_tokens: bool = False, strict: bool = True,
                 timeout_s: float = 120.0, unavailable_wait_s: float = 5.0, **provider_options: Any):
        if provider not in llm.PROVIDERS:
            raise ToolsError(f"proposer llm: unknown provider {provider!r} (expected one of "
                             f"{', '.join(llm.PROVIDERS)})")
        self.provider_name, self.model, self.base_url = provider, str(model), base_url
        self.max_tokens, self.max_retries, self.timeout_s = int(max_tokens), int(max_retries), float(timeout_s)
        self.price_in, self.price_out = float(price_in_per_mtok), float(price_out_per_mtok)
        self.write_factor, self.read_factor = float(cache_write_factor), float(cache_read_factor)
        self.count_tokens, self.strict = bool(count_tokens), bool(strict)
        self.api_key_env, self.provider_options = api_key_env, provider_options
        # the engine's first wait after an unavailable endpoint (doubled each time; ``engine.wait_out``)
        self.unavailable_wait_s = float(unavailable_wait_s)
        self._provider: llm.Provider | None = None

    @property
    def provider(self) -> llm.Provider:
        """Made on first use, so a loop file can be read without a key in the environment."""
        if self._provider is None:
            opts = dict(model=self.model, base_url=self.base_url, max_retries=self.max_retries,
                        timeout_s=self.timeout_s, **self.provider_options)
            if self.api_key_env:
                opts["api_key_env"] = self.api_key_env
            self._provider = llm.get(self.provider_name, **opts)
        return self._provider

    def ready(self) -> None:
        self.provider  # noqa: B018 - made now: a missing key or a misspelt option is said before anything runs

    def propose(self, priors: Priors, record: RecordFn) -> Proposal | None:
        prompt = render(priors)
        tool = llm.Tool(TOOL_NAME, TOOL_DESCRIPTION, tool_schema(priors.spec), self.strict)
        conv = llm.Conversation(prompt.system, prompt.cached, prompt.ask)
        # the engine asks again in the same iteration after refusing a proposal: keep every artefact apart
        refused = len(getattr(priors, "refusals", None) or [])
        tag = f"refused-{refused}." if refused else ""
        record(f"{tag}prompt.md", prompt.markdown())
        seen = {a.fingerprint: a for a in [*priors.attempts, *priors.refuted]}  # refuted last: it names the refuter
        spent, requests, errors, duplicate = llm.Usage(), 0, [], None
        while True:
            try:
                self._check_budget(priors, conv, tool, spent, requests)
            except BudgetExhausted:
                if duplicate is None:
                    raise
                return self._finish(duplicate, spent, requests, seen)  # no budget for the retry: return it anyway
            try:
                reply = self.provider.call(conv, tool, self.max_tokens)
            except llm.LLMError as e:  # what the earlier requests of this proposal spent is charged anyway
                e.usage = self._usage(spent, requests)
                raise
            requests += 1
            spent += reply.usage
            record(f"{tag}response.json" if requests == 1 else f"{tag}response-{requests}.json",
                   self._saved(reply, requests))
            try:
                proposal = self._parse(reply, priors.spec)
            except ProposalError as e:
                if duplicate is not None:  # the retry after a duplicate was unusable: return the duplicate
                    return self._finish(duplicate, spent, requests, seen)
                errors.append(str(e))
                if len(errors) > 1:
                    raise MalformedProposal(errors, self._usage(spent, requests)) from None
                feedback = repair_feedback(str(e))
            else:
                fp = proposal.change.fingerprint()
                if fp not in seen or duplicate is not None:
                    return self._finish(proposal, spent, requests, seen)
                duplicate, feedback = proposal, duplicate_feedback(seen[fp], fp)
            # what is sent back is the answer cut to size: an 8 MB statement went back whole in the repair request
            conv.rounds.append(llm.Round(_cut_call(reply.call), _cut(reply.text, ROUND_CHARS), feedback))
            record(f"{tag}prompt-{requests + 1}.md", feedback + "\n")

    def _parse(self, reply: llm.Reply, spec: LoopSpec) -> Proposal:
        if reply.call is None or reply.call.name != TOOL_NAME:
            cut = f" (cut at max_tokens={self.max_tokens})" if reply.stop_reason in ("max_tokens", "length") else ""
            raise ProposalError(f"the answer has no `{TOOL_NAME}` tool call{cut}")
        if reply.call.input is None:
            raise ProposalError(f"the `{TOOL_NAME}` arguments are not a JSON object: {reply.call.raw_arguments[:200]}")
        d = {k: v for k, v in tool_input_to_dict(reply.call.input).items() if k not in MODEL_SET}
        proposal = Proposal.from_dict(d)
        admission.check_fits(proposal, spec)
        proposal.proposer = self.name
        return proposal

    def _finish(self, proposal: Proposal, spent: llm.Usage, requests: int, seen: dict[str, Attempt]) -> Proposal:
        fp = proposal.change.fingerprint()
        if fp in seen:
            note = f"duplicate of {seen[fp].exp_id} (fingerprint {fp}) after one retry"
            proposal.notes = f"{proposal.notes}\n{note}".strip()
        proposal.usage = self._usage(spent, requests)
        return proposal

    # -- budgets and cost -------------------------------------------------------------------------------------

    def cost(self, u: llm.Usage) -> float:
        return (u.input_tokens * self.price_in + u.cache_write_tokens * self.price_in * self.write_factor
                + u.cache_read_tokens * self.price_in * self.read_factor + u.output_tokens * self.price_out) / 1e6

    def _usage(self, u: llm.Usage, requests: int) -> dict:
        return {"input_tokens": u.total_input, "output_tokens": u.output_tokens, "cache_read_tokens":
                u.cache_read_tokens, "cache_write_tokens": u.cache_write_tokens,
                "cost_usd": round(self.cost(u), 6), "requests": requests}

    def _estimate(self, conv: llm.Conversation, tool: llm.Tool) -> tuple[int, int, float]:
        """(input tokens, tokens, cost) the next request may use at most; char/4 unless count_tokens is on."""
        counted = self.provider.count_tokens(conv, tool) if self.count_tokens else None
        tokens_in = counted if counted is not None else math.ceil(
            (conv.chars() + len(json.dumps(tool.schema))) / 4)
        cost = (tokens_in * self.price_in * max(1.0, self.write_factor) + self.max_tokens * self.price_out) / 1e6
        return tokens_in, tokens_in + self.max_tokens, cost

    def _budgeted(self, priors: Priors) -> bool:
        return any(k in priors.budget_left for k in ("llm_tokens", "cost_usd"))

    def _check_budget(self, priors: Priors, conv: llm.Conversation, tool: llm.Tool, spent: llm.Usage,
                      requests: int) -> None:
        if not self._budgeted(priors):
            return
        tokens_in, tokens, cost = self._estimate(conv, tool)
        left = priors.budget_left
        used = {"llm_tokens": spent.total_input + spent.output_tokens, "cost_usd": self.cost(spent)}
        need = {"llm_tokens": tokens, "cost_usd": cost}
        for what in ("llm_tokens", "cost_usd"):
            if what in left and left[what] - used[what] < need[what]:
                raise BudgetExhausted(what, (
                    f"budget {what}: {left[what]:g} left, {used[what]:g} spent in this proposal, the next request may "
                    f"take {need[what]:.6g} (about {tokens_in} input tokens + max_tokens {self.max_tokens}); raise "
                    f"budget.{what} in the loop file or lower the proposer's max_tokens"),
                    self._usage(spent, requests))

    def _saved(self, reply: llm.Reply, n: int) -> str:
        """The answer as saved beside the iteration: every text in it at most ``SAVED_CHARS`` (a 40 MB text
        block was saved twice, 84 MB an iteration), the answer's text kept once, in the response."""
        return json.dumps(_cut({"request": n, "provider": self.provider_name, "model": self.model,
                                "stop_reason": reply.stop_reason, "usage": asdict(reply.usage),
                                "cost_usd": round(self.cost(reply.usage), 6),
                                "tool_input": reply.call.input if reply.call else None,
                                "text": reply.text if not reply.response else None,
                                "response": reply.response}, SAVED_CHARS), indent=2, default=str) + "\n"


ROUND_CHARS = 2_000     # characters of each text of an answer sent back with its repair feedback
SAVED_CHARS = 200_000   # characters of each text of a saved answer


def _cut(obj: Any, n: int) -> Any:
    """``obj`` with every string longer than ``n`` cut to ``n`` and a note of how much went."""
    if isinstance(obj, str):
        return obj if len(obj) <= n else f"{obj[:n]}… [{len(obj) - n:,} characters cut]"
    if isinstance(obj, dict):
        return {k: _cut(v, n) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_cut(v, n) for v in obj]
    return obj


def _cut_call(call: llm.ToolCall | None) -> llm.ToolCall | None:
    if call is None:
        return None
    short = _cut(call.input, ROUND_CHARS)
    raw = call.raw_arguments if short == call.input else json.dumps(short, sort_keys=True)  # still JSON, cut
    return llm.ToolCall(call.id, call.name, short, raw if short is not None else _cut(raw, ROUND_CHARS))
