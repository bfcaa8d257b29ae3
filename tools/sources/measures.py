"""What makes a piece of text a measured performance claim: a figure with a unit that matters for ML performance
(time, throughput, FLOP/s, utilisation, speed-up, a change in percent, memory, bandwidth) in a measured shape, and
none of the shapes of a number that was not measured (a hardware specification, a threshold in a rule, a target, a
hypothetical). Pure: text in, the matched figures out. bench/claim_labels/README.md says what counts."""

from __future__ import annotations

import re

# "12 345" (a space, no-break or narrow no-break space between thousands) is one number; "3.4 ± 0.2" one figure
_INT = r"(?:\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?![\d.,])|\d+(?:[.,]\d+)*)"
_NUM = rf"(?<![\w.])[~≈>+±-]?\s?{_INT}(?:\.\d+)?(?:\s?±\s?\d+(?:\.\d+)?)?(?:[kKMB](?![a-zA-Z]))?"
_RANGE = rf"{_NUM}(?:\s?(?:[-–—]|to)\s?{_NUM})?"


def _range(unit: str) -> str:
    """A figure or a range of two whose first end may repeat the unit: "2x-3x", "30%-40%", "2 ms to 3 ms" (the
    first end was lost: "3x faster" quoted for "2x-3x faster")."""
    return rf"{_NUM}(?:\s?(?:{unit})?\s?(?:[-–—]|to)\s?{_NUM})?"


_TIME = r"(?:ms|µs|μs|us|ns|s|sec|secs|seconds?|min|mins|minutes?|hours?)\b"
_CLOCK = r"(?<![\w.])\d+h(?:\d+m)?(?:\d+s)?\b|(?<![\w.])\d+m\d+s\b"  # 1m23s, 2h05m: a time as a clock shows it
_MEM = r"(?:[KMGT]i?B|[KMGT]B|GBs)\b(?!/)"
_X = r"(?:[x×]\b|[x×](?=\W)|-fold|\s?times\b)"
_RANGE_X, _RANGE_PCT, _RANGE_TIME, _RANGE_MEM = _range(_X), _range("%"), _range(_TIME), _range(_MEM)
_CHANGE = (r"(?:faster|slower|speed-?ups?|quicker|less|more|lower|higher|fewer|smaller|larger|longer|shorter|"
           r"reduction|improvement|increase|decrease|savings?|saved|gains?|boost|better|cheaper|"
           r"throughput|memory|latency|compression|efficien\w*)")
_VERB = (r"\b(?:reduc\w*|increas\w*|improv\w*|cut\w*|sav\w*|speed\w*|boost\w*|lower\w*|rais\w*|accelerat(?!ors?\b)\w*|"
         r"decreas\w*|drop(?!out)\w*|fell|falls?|gain\w*|shrink\w*|shr[au]nk|grow\w*|grew|slow\w*|rose|rises?|went|"
         r"jump\w*|climb\w*|doubl\w*|halv\w*|trim\w*|shav\w*|outperform\w*|beats?|achiev\w*|reach\w*|deliver\w*|"
         r"cost\w*)")

UNITS = (
    ("throughput", rf"{_RANGE}\s*(?:[kKMGTP]?\s*tok(?:en)?s?/s(?:ec)?|tokens? per second|samples?/s(?:ec)?|"
                   rf"images?/s(?:ec)?|it/s|req(?:uest)?s?/s|queries/s|QPS\b|seq(?:uence)?s?/s)"),
    ("flops", rf"{_RANGE}\s*(?:[TPGE]?FLOPs/s|[TPGE]FLOP/?s|[TPGE]FLOPS)"),  # FLOPs/s first: a rate, not a count
    ("mfu", rf"(?:MFU|HFU|utili[sz]ation)[^.\n]{{0,40}}?{_RANGE_PCT}\s*%|{_RANGE_PCT}\s*%\s*(?:MFU|HFU|model FLOPs? utili[sz]ation"
            rf"|(?:of|the)\s+(?:the\s+)?(?:peak|theoretical|roofline|cuBLAS|cuDNN|\w+ bandwidth|bandwidth|"
            rf"hardware|SOL|speed[- ]of[- ]light))|achiev\w*\s+[~≈]?{_NUM}\s*%"),
    ("speedup", rf"{_RANGE_X}\s*{_X}\s*(?:{_CHANGE}|on\s|over\s|vs\.?\s|compute|speed)|"
                rf"speed-?ups? of (?:up to |about |around |~)?{_RANGE_X}\s*{_X}|"
                rf"(?:speed-?up|faster|slower|throughput|performance)[^.\n]{{0,25}}?\b{_RANGE_X}\s*{_X}"),
    ("percent", rf"{_RANGE_PCT}\s*%\s*(?:{_CHANGE})|{_VERB}[^.\n|]{{0,60}}?\b(?:by|of|to)\s+(?:up to |about |around |"
                rf"over |more than |roughly |nearly |almost |only |just )?{_RANGE_PCT}\s*%|{_RANGE_PCT}\s*%\s+(?:of|in)\s+(?:the\s+)?"
                rf"(?:[\w-]+\s+)?(?:step time|step|training time|run ?time|throughput|latency|memory|time)|(?:(?<=\s)|(?<=\()|^)[+-]\s?\d+(?:\.\d+)?\s?%"),
    # a multiple alone (`from 3x to 4x of the model dimension`) is a configuration; a speed-up says so (above)
    ("from-to", rf"from\s+{_NUM}\s*(?:{_TIME}|{_MEM}|%|[TGP]FLOPS)?\s+(?:to|down to|up to)\s+{_NUM}\s*"
                rf"(?:{_TIME}|{_MEM}|%|[TGP]FLOPS)|{_NUM}\s*(?:{_TIME}|{_MEM}|%)\s*(?:→|->|=>)\s*{_NUM}\s*"
                rf"(?:{_TIME}|{_MEM}|%)"),
    ("memory", rf"{_RANGE_MEM}\s*{_MEM}\s+(?:of\s+)?(?:less|more|lower|fewer|saved|savings?|reduction|smaller|"
               rf"(?:peak\s+)?(?:memory|VRAM|HBM|activation)\s+(?:usage|use|footprint|savings?|reduction|used))|"
               rf"(?:sav\w*|reduc\w*|free\w*|us(?:es|ed|ing)|utili[sz]\w*|consum\w*|peak\w*(?: memory)?|OOM by|"
               rf"footprint\s+(?:of|is))"
               rf"\s+(?:up to |about |around |approximately |roughly |~|only |just )?{_RANGE_MEM}\s*{_MEM}|"
               rf"(?:fits? (?:on|in|into)|with (?:just|only)|in (?:just|only)|on (?:just|only))\s+(?:a |an |one )?"
               rf"{_RANGE_MEM}\s*{_MEM}|"
               rf"{_VERB}[^.\n|]{{0,40}}?\bby\s+(?:up to |about |around |~|only |just |over |nearly )?{_RANGE_MEM}\s*{_MEM}"),
    ("context", r"(?:enabl\w*|with|fits?|reach\w*|achiev\w*|handl\w*)\s+(?:up to |over |more than )?[>~]?\d+K\+?"
                r"\s+(?:tokens? (?:of )?)?context"),
    ("time", rf"(?:{_RANGE_TIME}\s*{_TIME}|{_CLOCK})\s*(?:/|per)\s*(?:step|iteration|iter|token|layer|evaluation|request|"
             rf"image|video|batch|epoch|sample|call|forward|backward)|{_RANGE_TIME}\s*{_TIME}\+?\s+(?:[\w-]+\s+)?"
             rf"(?:penalty|overhead|slowdown|delay)|(?:step time|latency|compile time|compilation|"
             rf"took|takes?|taking|runs? in|finish\w* in|completes? in|wall[- ]clock|time to first token|TTFT)"
             rf"[^.\n]{{0,30}}?{_RANGE_TIME}\s*{_TIME}|{_RANGE_TIME}\s*{_TIME}\s+(?:faster|slower|saved|less|per)|"
             rf"(?:about|around|roughly|only|just|~)\s*{_NUM}\s*{_TIME}"),
    ("bandwidth", rf"(?:achiev\w*|reach\w*|measured|sustain\w*|attain\w*|gets?|hits?|observed|traffic|moved?|"
                  rf"transferr?\w*|keeps?|kept|runs? at|ran at|streams?)[^.\n]{{0,30}}?"
                  rf"{_RANGE}\s*(?:[GT]B/s|GiB/s|TiB/s|Gbps)"),
)
_UNIT_RX = [(name, re.compile(rx, re.I)) for name, rx in UNITS]
# What each family's matches always hold, found far faster than the family's pattern runs: a sentence without it is
# not searched by that pattern (tests/sources/test_claims_filter.py checks every match holds its family's need).
NEEDS = {"throughput": re.compile(r"/s|per second|qps", re.I), "flops": re.compile(r"flop", re.I),
         "mfu": re.compile(r"%"), "speedup": re.compile(r"\d\s*[x×]|fold|times", re.I), "percent": re.compile(r"%"),
         "from-to": re.compile(r"from|→|->|=>", re.I), "memory": re.compile(r"[kmgt]i?bs?\b", re.I),
         "context": re.compile(r"context", re.I), "time": re.compile(r"\d\s*(?:[kmb]\s*)?(?:[mµμun]?s\b|sec|min|hour)", re.I),
         "bandwidth": re.compile(r"b/s|gbps", re.I)}
ANY_UNIT = re.compile("|".join(f"(?:{rx})" for _, rx in UNITS), re.I)
# A figure with its unit: every pattern above holds one (tests/sources/test_claims_filter.py checks it on generated
# phrases). One cheap search rules out most sentences and sections before the patterns, which cost far more, run.
UNIT_NEAR = re.compile(r"\d\s*(?:[kKMB]\s*)?(?:%|[x×]|-fold|times|ms|µs|μs|us|ns|s\b|sec|min|hour|[KMGT]i?B|GBs|"
                       r"[TPGE]?FLOP|tok|sample|image|it/s|req|quer|qps|seq|context|tokens? (?:of )?context)", re.I)

# Shapes of a number that nobody measured. A spec: the hardware's own figures. A rule or target: a threshold to
# compare against ("< 30 % of bandwidth", "aim for > 80 %"). A hypothetical or a projection ("would", "could").
_SPEC = re.compile(r"\b(?:peak\s+(?:(?:bf16|fp16|fp8|fp32|tf32|int8|dense|sparse|tensor(?: core)?)\s+)?(?:[TPG]?FLOP|"
                   r"compute|bandwidth|throughput|performance)|peak\s+[~≈]?\d[\d.,]*\s?[TPG]?(?:FLOP|[GT]i?B/s)|"
                   r"theoretical|spec(?:ification)?s?|(?:memory|HBM|DRAM|storage|disk)\s+capacity|capacity of \d|"
                   r"nominal|rated|max(?:imum)? (?:bandwidth|"
                   r"memory|threads)|\d+(?:\.\d+)?\s?[TPG]FLOP/?S?\s+peak|compute capability|GDDR\d|HBM\d\w*|per SM|/SM\b|"
                   r"\d+(?:\.\d+)?\s?(?:[GT]B/s|GiB/s|TiB/s)\**\s+(?:memory\s+)?bandwidth)", re.I)
_RULE = re.compile(r"(?:^|[\s(:])[<>≤≥]\s?~?\d+(?:\.\d+)?\s?%(?!\s*(?:more|less|faster|slower|higher|"
                   r"lower|overhead|of (?:the )?(?:time|step)))|(?:^|[\s(:])(?:[<>≤≥]=?|at least|at most|below|above|under|over|less than|more than|"
                   r"greater than)\s?~?\d[^.\n|]{0,40}?(?:→|->|:|then|means|indicat|suggest|consider|use |try |"
                   r"is (?:good|bad|poor|fine|ok|excellent|acceptable|low|high))|\b(?:if|when|unless)\b[^.\n|]{0,50}?"
                   r"[<>≤≥]\s?\d|\b(?:aim(?:ing|s|ed)?\b|target(?:ing|s)?|goal|(?<!as )expect(?:ed)?|"
                   r"wants? to|would like|striv\w*|should (?:reach|get|see|achieve|be)|must|required?|rule of thumb|"
                   r"threshold|budget)\b", re.I)
_HYPOTHETICAL = re.compile(r"\b(?:not (?:practical|possible|feasible|realistic|achievable)|impossible|"
                           r"would|could|might|may be|suppose|assum\w+|imagine|hypothetical\w*|"
                           r"means that|means\b|say we|let's say|projected|projection|"
                           r"estimated?|in theory|ideally)\b|^\W*if\b", re.I)  # "If EP = 64, ..."


def figures(text: str) -> list[tuple[str, str]]:
    """(family, matched text) of every measured-shaped figure in ``text``, in pattern order."""
    return [(name, m.group(0).strip()) for name, rx in _UNIT_RX if NEEDS[name].search(text)
            for m in rx.finditer(text)]


def may_hold(text: str) -> bool:
    """Whether ``text`` has a figure with a unit at all (no pattern can match where this is false)."""
    return UNIT_NEAR.search(text) is not None


def unmeasured(text: str) -> str | None:
    """Why the figures in ``text`` were not measured (``spec``, ``rule``, ``hypothetical``), or None."""
    for why, rx in (("spec", _SPEC), ("rule", _RULE), ("hypothetical", _HYPOTHETICAL)):
        if rx.search(text):
            return why
    return None
