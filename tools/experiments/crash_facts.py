"""What a failed run's log says, read without running anything: the last Python traceback (or a faulthandler dump
of a hung process), the exception and the XLA/JAX error lines, a kind (``KINDS``: ``oom``, ``compile``, ``shape``,
``syntax``, ``nan``, ``timeout``, ``hang``, ``killed``, ``signal``, ``stopped``, ...), the out-of-memory figures the
allocator printed, and a signature: the kind, the message with numbers, addresses and paths stripped, the innermost
model frame and the innermost framework frame. Two runs that fail the same way share a signature, whatever the batch
size or the address. Pure: text in, data out (frames are linked to pages in ``crash_pages``)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field

KINDS = ("oom", "compile", "shape", "syntax", "nan", "timeout", "hang", "killed", "signal", "stopped", "not_run",
         "lost", "other")
TRACEBACK = "Traceback (most recent call last):"
PY_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\s]+)\s*$')
SYNTAX_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)\s*$')  # where a file does not parse
NATIVE_DEATHS = (4, 6, 7, 8, 11)  # SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGSEGV
SYNTAX = re.compile(r"^(?:SyntaxError|IndentationError|TabError)\b")
FAULT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>[^\s]+)\s*$')
SPY_FRAME = re.compile(r"^\s+(?P<func>\S+) \((?P<file>[^()]+):(?P<line>\d+)\)\s*$")  # py-spy dump
EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning)|"
                       r"[A-Za-z_][\w.]*\.[A-Z]\w*)(?::\s?(?P<msg>.*))?$")
XLA_LINE = re.compile(r"(RESOURCE_EXHAUSTED|INTERNAL|INVALID_ARGUMENT|UNIMPLEMENTED|FAILED_PRECONDITION|"
                      r"Mosaic|LLVM ERROR|Check failed|F\d{4} |E\d{4} )")
OOM = re.compile(r"RESOURCE_EXHAUSTED|out of memory|OutOfMemory|\bOOM\b|MemoryError|std::bad_alloc|OOMKilled"
                 r"|OUT_OF_MEMORY", re.I)  # the last two: Kubernetes' and Slurm's word for a job over its memory
COMPILE = re.compile(r"compil|Mosaic|LLVM ERROR|UNIMPLEMENTED|lowering|MLIR|HloModule|Check failed|"
                     r"Unknown flags? in XLA_FLAGS", re.I)  # the compiler refused its options: a bad XLA flag
SHAPE = re.compile(r"shape|dtype|incompatible|broadcast|rank|dimension|reshape|equal division|TypeError|"
                   r"dot_general requires", re.I)
SIZE = {"": 1, "B": 1, "K": 2 ** 10, "KB": 2 ** 10, "KIB": 2 ** 10, "M": 2 ** 20, "MB": 2 ** 20, "MIB": 2 ** 20,
        "G": 2 ** 30, "GB": 2 ** 30, "GIB": 2 ** 30, "T": 2 ** 40, "TB": 2 ** 40, "TIB": 2 ** 40}
_NUM = r"([\d.]+)\s*([KMGT]i?B?|B)?"
NEEDED = re.compile(r"(?:trying to allocate|allocating|allocate)\s+" + _NUM, re.I)
USED_OF = re.compile(r"Used\s+" + _NUM + r"\s+of\s+" + _NUM, re.I)
LARGEST = re.compile(r"^\s*\d+\.\s+Size:\s+" + _NUM, re.I | re.M)
# the bare interpreter and its standard library: neither model code nor a framework
STDLIB = re.compile(r"/lib/python\d\.\d+/(?!site-packages|dist-packages)")


@dataclass
class Frame:
    file: str
    line: int
    func: str
    code: str = ""
    role: str = "other"       # model | ingested | framework | stdlib | other
    package: str = ""         # framework: the top-level package (jax, flax, ...); ingested: the codebase slug
    rel: str = ""             # the path inside the package / codebase / run folder


@dataclass
class CrashFacts:
    kind: str
    message: str = ""                       # the exception line (or the first XLA error line)
    exception: str = ""                     # its type
    frames: list[Frame] = field(default_factory=list)   # outermost first
    error_lines: list[str] = field(default_factory=list)
    oom: dict = field(default_factory=dict)  # needed_bytes, used_bytes, available_bytes, largest_bytes
    signature: str = ""
    nan_step: int | None = None

    def as_record(self) -> dict:
        d = asdict(self)
        d["frames"] = [{k: v for k, v in f.items() if v not in ("", None)} for f in d["frames"]]
        return {k: v for k, v in d.items() if v not in ("", None, [], {})}

    def innermost(self, role: str) -> Frame | None:
        return next((f for f in reversed(self.frames) if f.role == role), None)


def _bytes(num: str, unit: str | None) -> int:
    return int(float(num) * SIZE.get((unit or "").upper(), 1))


def oom_figures(text: str) -> dict:
    """The allocator's figures: what one allocation needed, used of available, the largest allocations listed."""
    out: dict = {}
    if m := NEEDED.search(text):
        out["needed_bytes"] = _bytes(*m.groups())
    if m := USED_OF.search(text):
        out["used_bytes"], out["available_bytes"] = _bytes(m[1], m[2]), _bytes(m[3], m[4])
    largest = [_bytes(*m.groups()) for m in LARGEST.finditer(text)][:5]
    if largest:
        out["largest_bytes"] = largest
    return out


def frames_of(text: str) -> tuple[list[Frame], str, str]:
    """(frames outermost first, exception type, exception message) of the last traceback in ``text``, or of a
    script that does not parse (``File "x.py", line 3`` then a ``SyntaxError``, no header); a faulthandler dump (a
    hung process's stack, most recent call first) when there is neither."""
    lines = text.splitlines()
    start = max((i for i, ln in enumerate(lines) if ln.strip() == TRACEBACK), default=None)
    if start is None:  # the script itself does not parse: Python prints where, with no traceback header
        last = max((i for i, ln in enumerate(lines) if SYNTAX.match(ln)), default=None)
        # the line before its `File "x.py", line 3`: the loop below reads from start + 1
        start = next((i - 2 for i in range(last, max(last - 6, 0), -1) if SYNTAX_FRAME.match(lines[i - 1])),
                     None) if last is not None else None
        if start is None:
            return _faulthandler(lines), "", ""
    frames: list[Frame] = []
    exc_type = msg = ""
    i = start + 1
    while i < len(lines):
        ln = lines[i]
        if m := PY_FRAME.match(ln):
            frames.append(Frame(m["file"], int(m["line"]), m["func"]))
        elif m := SYNTAX_FRAME.match(ln):
            frames.append(Frame(m["file"], int(m["line"]), "<module>"))
        elif frames and ln.startswith((" ", "\t")) and not frames[-1].code and ln.strip() and \
                not set(ln.strip()) <= set("^~ "):
            frames[-1].code = ln.strip()[:300]
        elif ln and not ln.startswith((" ", "\t")) and (m := EXCEPTION.match(ln.strip())):
            exc_type, msg = m["type"], (m["msg"] or "").strip()
            break
        i += 1
    return frames, exc_type, msg


def _faulthandler(lines: list[str]) -> list[Frame]:
    """The main thread's stack of a hung process, outermost first: from ``py-spy dump`` (``Thread N (idle):
    "MainThread"``) or ``faulthandler`` (``Current thread 0x...`` / ``Thread 0x... (most recent call first):``),
    both innermost first."""
    blocks: list[tuple[bool, list[Frame]]] = []
    for ln in lines:
        s = ln.strip()
        if re.match(r"^(Current thread|Thread) .*\(most recent call first\):", s):
            blocks.append((s.startswith("Current thread"), []))
        elif re.match(r'^Thread \d+ \([\w+ ]+\): "', s):  # py-spy: (idle), (active), (active+gil)
            blocks.append(('"MainThread"' in s, []))
        elif blocks and ((m := FAULT_FRAME.match(ln)) or (m := SPY_FRAME.match(ln))):
            blocks[-1][1].append(Frame(m["file"], int(m["line"]), m["func"]))
    main = next((b for first, b in blocks if first and b), None) or next((b for _, b in blocks if b), [])
    return list(reversed(main))


def classify(frames: list[Frame], run_dirs: tuple[str, ...] = ()) -> None:
    """Each frame's role: model code (under one of ``run_dirs``, or a relative path), an ingested codebase
    (``raw/code/<slug>/``), an installed framework (``site-packages/<package>/``), the standard library."""
    dirs = tuple(d.rstrip("/") + "/" for d in run_dirs if d)
    for f in frames:
        path = f.file.replace("\\", "/")
        if m := re.search(r"(?:^|/)raw/code/([^/]+)/(.+)$", path):
            f.role, f.package, f.rel = "ingested", m[1], m[2]
        elif m := re.search(r"/(?:site|dist)-packages/(([^/]+)/.+|[^/]+\.py)$", path):
            rel = m[1]
            f.role, f.package, f.rel = "framework", (m[2] or rel.removesuffix(".py")), rel
        elif STDLIB.search(path) or path.startswith("<"):
            f.role = "stdlib"
        elif any(path.startswith(d) for d in dirs):
            f.role, f.rel = "model", path[len(next(d for d in dirs if path.startswith(d))):]
        elif not path.startswith("/"):
            f.role, f.rel = "model", path
        else:
            f.role, f.rel = "other", path


_WARNING = re.compile(r"^\s*(?:W\d{4} |WARNING\b)|not a failure", re.I)
_GLOG_ERROR = re.compile(r"^\s*[EF]\d{4} ")
_LAUNCHER = re.compile(r"^(?:\[[^\]\n]{1,40}\]:?|\((?:\w+ )?pid=\d+(?:, ip=[\d.]+)?\)) ?")


def oom_in(text: str) -> str | None:
    """The words saying the run ran out of memory, or None. Where the log holds a Python traceback: its exceptions
    (the chained causes too) and XLA's error lines (``E``/``F``); else any line of its end that is no warning. An
    allocator's warning ("ran out of memory trying to allocate 2.10GiB ... not a failure") or a banner naming OOM
    before an unrelated ``KeyError`` is no out-of-memory (filed ``oom``, it steered the loop off larger batches)."""
    tail = text[-20000:]
    lines = [_LAUNCHER.sub("", ln) for ln in tail.splitlines()]  # torchrun's `[rank0]: `, Ray's `(pid=12) `
    if TRACEBACK in tail:
        lines = [ln for ln in lines if EXCEPTION.match(ln) or _GLOG_ERROR.match(ln)]
    for ln in lines:
        if (m := OOM.search(ln)) and not _WARNING.search(ln):
            return m.group(0)
    return None


def kind_of(reason: str, text: str, exc_type: str, message: str, rc: int | None = None) -> str:
    """The failure's kind, from the runner's reason first (it knows a timeout, a hang, a signal), then the log."""
    r = reason.lower()
    if r.startswith("not run:"):
        return "not_run"
    if r.startswith("stopped by"):
        return "stopped"  # Ctrl-C or SIGTERM of the runner: nothing about the configuration
    if r.startswith("lost by the runner") and not OOM.search(r):
        return "lost"  # a node failed, an admin cancelled it, credentials expired: the cluster's, not the model's
    if r.startswith("hung") or "no output for" in r:
        return "hang"
    if r.startswith("timed out"):
        return "timeout"
    if "non-finite loss" in r:
        return "nan"
    if OOM.search(r) or OOM.search(f"{exc_type}: {message}") or oom_in(text):
        return "oom"
    if "SIGKILL" in reason or rc in (-9, 137):
        return "killed"
    if SYNTAX.match(exc_type):
        return "syntax"
    sig = -rc if rc is not None and rc < 0 else rc - 128 if rc is not None and 128 < rc < 160 else None
    if not exc_type and sig in NATIVE_DEATHS:
        return "signal"  # native code died under Python, no exception was raised
    if not exc_type and sig is not None:
        return "killed"  # SIGTERM from a scheduler, SIGINT from a terminal
    if COMPILE.search(f"{exc_type} {message}"):
        return "compile"
    if not exc_type and COMPILE.search("\n".join(ln for ln in text.splitlines()[-400:] if XLA_LINE.search(ln))):
        return "compile"  # XLA aborted (an F-line) before any Python exception: a bad flag, a failed check
    if SHAPE.search(f"{exc_type} {message}"):
        return "shape"
    return "other"


_STRIP = [(re.compile(r"0x[0-9a-fA-F]+"), "0x_"), (re.compile(r"(?:/[\w.\-+]+)+/?"), "<path>"),
          (re.compile(r"\d+(?:\.\d+)?"), "N"), (re.compile(r"\s+"), " ")]


def normalize(message: str) -> str:
    """The message without what changes from run to run: numbers, addresses, paths."""
    out = message
    for pat, rep in _STRIP:
        out = pat.sub(rep, out)
    return out.strip()[:240]


def signature(kind: str, message: str, frames: list[Frame]) -> str:
    """``<kind>-<10 hex>``: the kind, the normalized message, the innermost model and framework frames."""
    model = next((f for f in reversed(frames) if f.role == "model"), None)
    fw = next((f for f in reversed(frames) if f.role in ("framework", "ingested")), None)
    parts = [kind, normalize(message), f"{model.rel}:{model.func}" if model else "",
             f"{fw.package}/{fw.rel}:{fw.func}" if fw else ""]
    return f"{kind}-{hashlib.sha1('|'.join(parts).encode()).hexdigest()[:10]}"


def analyze(log_text: str, reason: str, rc: int | None = None, run_dirs: tuple[str, ...] = (),
            losses: list | None = None) -> CrashFacts:
    """The crash facts of one failed arm: its log, the runner's reason, exit code and the folders its code ran
    from."""
    frames, exc_type, msg = frames_of(log_text)
    classify(frames, run_dirs)
    errors = [ln.strip()[:300] for ln in log_text.splitlines()[-400:] if XLA_LINE.search(ln)][-8:]
    kind = kind_of(reason, log_text, exc_type, msg, rc)
    message = f"{exc_type}: {msg}" if exc_type else (errors[-1] if errors else reason)
    if kind in ("timeout", "hang", "nan", "not_run", "stopped", "killed", "signal", "lost") and not exc_type:
        message = reason
    elif kind == "other" and not exc_type and not errors and (said := _last_said(log_text)):
        message = f"{said} ({reason})"  # `print("fatal: data dir missing"); sys.exit(1)`: its own words
    facts = CrashFacts(kind, message[:500], exc_type, frames, errors)
    if kind == "oom":
        facts.oom = oom_figures(log_text[-200000:])
    if kind == "nan" and losses:
        facts.nan_step = next((i for i, x in enumerate(losses) if not _finite(x)), None)
    facts.signature = signature(kind, message if kind not in ("timeout", "hang", "nan", "not_run") else kind, frames)
    return facts


def _last_said(text: str) -> str:
    """The last line the command printed that is neither blank nor its JSON result line."""
    return next((ln.strip()[:300] for ln in reversed(text[-20000:].splitlines())
                 if ln.strip() and not ln.lstrip().startswith("{")), "")


def _finite(x) -> bool:
    try:
        return float(x) == float(x) and abs(float(x)) != float("inf")
    except (TypeError, ValueError, OverflowError):
        return False
