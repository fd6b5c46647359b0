"""Load test of the hosted demo: many browser sessions against one local server.

Starts ``streamlit run app.py`` in hosted mode (``FLAMINO_HOSTED=1``) with the untrained
``random:tiny`` model on a free loopback port, then drives ``--sessions`` headless Chromium
pages (one browser, one context each) for ``--duration`` seconds. Each session loops: paste a
different input (short, ~300 and ~1500 residues, and invalid ones), open every page, sometimes
run the masked scan, and now and then close its page while a masked scan is running (the
server must stay healthy and later sessions must work). Server memory (RSS of the process tree)
is sampled every second.

Outcomes are classified: validator messages for invalid input and "server is busy" warnings
from the heavy-job queue are expected; exceptions on the page, "Something went wrong",
unexpected error messages, timeouts and tracebacks in the server log are not. The exit status
is 1 when anything unexpected happened.

    python loadtest/run.py                       # 8 sessions, 180 s, updates docs/reliability.md
    python loadtest/run.py --duration 30 --sessions 2 --report none   # a quick try
    python loadtest/run.py --attacker            # the same with a hostile tab (issue #26)

Only 127.0.0.1 is used; every wait is bounded and a watchdog ends the run at the latest
``--duration`` + 420 s after the start.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import datetime
import os
import platform
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from browser_fixtures import CHROMIUM_ARGS  # noqa: E402  (the test suite's Chromium flags, one list)
CHROMIUM = "/usr/bin/chromium"
AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
SIZES = {"short": (60, 90), "medium": (280, 320), "long": (1450, 1550)}
# One session's sequence of inputs; sessions start at different offsets.
SCHEDULE = ["short", "medium", "invalid", "short", "long", "invalid", "medium", "short", "invalid"]
INVALID = ["bad letter", "stop codon", "GenBank", "header only", "over the limit", "mixed"]
PAGES = {"predictions": ("Masked predictions", 3), "embeddings": ("Embeddings", 2), "attention": ("Attention", 3)}
BUSY = "server is busy"
# A masked scan estimated over 30 s is asked for first (app_pages/_ui/server/jobs_panel.py: "Start (about
# 2 minutes)"). A button's innerText starts with its icon's ligature name ("play_arrow"), so its
# label is its last line.
START = re.compile(r"Start \(")
# The progress of a scan that runs (on the page or in the sidebar), or its place in the queue; not
# the sidebar's "Masked scan of ...: done" of a finished one.
SCAN_RUNNING = re.compile(r"Masked scan of .+: (queued|[\d,]+ of [\d,]+ positions)|Waiting for a free slot")
MARKER_BEGIN, MARKER_END = "<!-- loadtest:begin -->", "<!-- loadtest:end -->"
ATTACKER_BEGIN, ATTACKER_END = "<!-- loadtest-attacker:begin -->", "<!-- loadtest-attacker:end -->"

PROBE = """() => {
  const all = (s) => Array.from(document.querySelectorAll(s));
  const text = (s) => all(s).map((e) => e.innerText);
  return {
    running: !!document.querySelector('[data-testid="stStatusWidget"]'),
    charts: all('[data-testid="stPlotlyChart"]').filter((e) => e.querySelector('.main-svg')).length,
    errors: text('[data-testid="stAlertContentError"]'),
    warnings: text('[data-testid="stAlertContentWarning"]'),
    exceptions: text('[data-testid="stException"]'),
    headings: text('h1, h2'),
    metrics: text('[data-testid="stMetricLabel"]'),
    buttons: text('button'),
    sidebar: (document.querySelector('[data-testid="stSidebar"]') || {}).innerText || '',
  };
}"""


# --- bookkeeping ----------------------------------------------------------------------------------
@dataclasses.dataclass
class Stats:
    latencies: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(list))
    expected: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unexpected: list = dataclasses.field(default_factory=list)
    iterations: int = 0
    closed_mid_job: int = 0
    rss: list = dataclasses.field(default_factory=list)  # (seconds since start, bytes)
    server_cpu: list = dataclasses.field(default_factory=list)  # percent of one CPU, per second
    machine_cpu: list = dataclasses.field(default_factory=list)  # percent of all CPUs
    load: list = dataclasses.field(default_factory=list)  # 1-minute load average, at start and end
    health_failures: int = 0
    warmup: dict = dataclasses.field(default_factory=dict)  # action -> seconds (first compilations)

    def fail(self, session: int, what: str, detail: str) -> None:
        self.unexpected.append((session, what, detail[:300]))
        print(f"  UNEXPECTED session {session}: {what}: {detail[:200]}", flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# --- the server -----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, cache: Path, log: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "FLAMINO_HOSTED": "1",
        "FLAMINO_MODEL": "random:tiny",
        "FLAMINO_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
    }
    command = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", "127.0.0.1",
        "--server.fileWatcherType", "none",
        "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    with log.open("w") as out:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def wait_until_up(base: str, process: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not healthy(base):
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"streamlit did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def sample_memory(pid: int, stats: Stats, stop: threading.Event, started: float) -> None:
    import psutil

    try:
        root = psutil.Process(pid)
        root.cpu_percent()
        psutil.cpu_percent()
    except psutil.NoSuchProcess:
        return
    while not stop.wait(1.0):
        try:
            procs = [root, *root.children(recursive=True)]
            stats.rss.append((time.monotonic() - started, sum(p.memory_info().rss for p in procs)))
            stats.server_cpu.append(root.cpu_percent())
            stats.machine_cpu.append(psutil.cpu_percent())
        except psutil.Error:
            pass


# --- inputs -------------------------------------------------------------------------------------------
def protein(rng: random.Random, size: str) -> str:
    low, high = SIZES[size]
    return "".join(rng.choice(AMINO_ACIDS) for _ in range(rng.randint(low, high)))


def make_input(kind: str, invalid: str, uid: str, rng: random.Random) -> tuple[str, str | None, str | None]:
    """(FASTA text, id that must be listed as ready or None, error fragment expected or None)."""
    if kind != "invalid":
        return f">{uid} load test {kind}\n{protein(rng, kind)}\n", uid, None
    if invalid == "bad letter":
        return f">{uid}\nMKVLJAGGT\n", None, f"{uid}: position 5: 'J' is not an amino-acid letter"
    if invalid == "stop codon":
        return f">{uid}\nMKV*LAGG\n", None, f"{uid}: position 4: '*' (stop codon)"
    if invalid == "GenBank":
        return "LOCUS       X  50 bp  DNA\nDEFINITION  test.\n//\n", None, "GenBank flat file"
    if invalid == "header only":
        return f">{uid}\n", None, f"{uid}: no sequence under this header"
    if invalid == "over the limit":  # (2,000-5,000 residues are analysed in a window, not refused)
        return f">{uid}\n{'MKVLAG' * 900}\n", None, f"{uid}: 5,400 residues, more than the limit of 5,000"
    if invalid == "mixed":  # the good record must still be analysed
        good = protein(rng, "short")
        return f">{uid}_good\n{good}\n>{uid}_bad\nMK1J\n", f"{uid}_good", f"{uid}_bad: position 3"
    raise ValueError(invalid)


# --- one browser session --------------------------------------------------------------------------
class Session:
    def __init__(self, index: int, browser, base: str, stats: Stats, timeout: float):
        self.index, self.browser, self.base, self.stats, self.timeout = index, browser, base, stats, timeout
        self.context = self.page = None

    async def open(self) -> None:
        self.context = await self.browser.new_context(viewport={"width": 1400, "height": 1600})
        self.page = await self.context.new_page()
        self.page.set_default_timeout(self.timeout * 1000)
        await self.page.goto(self.base)
        await self.page.get_by_text("Your sequences").wait_for()

    async def close(self) -> None:
        if self.context is not None:
            await self.context.close()
            self.context = self.page = None

    async def settle(self, done, started: float) -> tuple[dict, float] | None:
        """Poll the page until the script run is over and ``done(state)`` holds; (state, latency)."""
        idle_since = None
        while time.monotonic() - started < self.timeout:
            state = await self.page.evaluate(PROBE)
            finished = done(state) or state["exceptions"] or any("Something went wrong" in e for e in state["errors"])
            if finished and not state["running"]:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= 0.25:  # still idle: the run is really over
                    return state, idle_since - started
            else:
                idle_since = None
            await asyncio.sleep(0.1)
        return None

    def check(self, action: str, state: dict | None, expected_error: str | None = None) -> bool:
        """Classify what the page shows; True when the action succeeded as expected."""
        where = f" (at {self.page.url[:120]})" if self.page is not None else ""
        if state is None:
            self.stats.fail(self.index, action, f"no result within {self.timeout:.0f} s{where}")
            return False
        if state["exceptions"]:
            self.stats.fail(self.index, action, "exception on the page: " + state["exceptions"][0] + where)
            return False
        ok = True
        for error in state["errors"]:
            if expected_error and expected_error in error:
                self.stats.expected["validator message"] += 1
            else:
                self.stats.fail(self.index, action, "error shown: " + " ".join(error.split()) + where)
                ok = False
        for warning in state["warnings"]:
            if BUSY in warning:
                self.stats.expected["queue full (server is busy)"] += 1
        if expected_error and not any(expected_error in e for e in state["errors"]):
            self.stats.fail(self.index, action, f"expected message missing: {expected_error}")
            ok = False
        return ok

    async def nav(self, title: str) -> None:
        await self.page.locator('[data-testid="stSidebarNavLink"]').filter(has_text=title).click()

    async def paste(self, text: str, ready_id: str | None, error: str | None, label: str) -> bool:
        await self.nav("Input")
        box = self.page.get_by_label("FASTA or sequence")
        await box.wait_for()
        await box.fill(text)
        started = time.monotonic()
        await box.press("Control+Enter")

        def done(state):
            listed = ready_id is None or f"{ready_id} (" in state["sidebar"]
            shown = error is None or any(error in e for e in state["errors"])
            return listed and shown

        result = await self.settle(done, started)
        if result:
            self.stats.latencies[label].append(result[1])
        return self.check(label, result and result[0], error)

    async def visit(self, name: str, size: str) -> bool:
        heading, charts = PAGES[name]
        started = time.monotonic()
        await self.nav(heading)

        def done(state):
            busy = any(BUSY in w for w in state["warnings"])
            return heading in state["headings"] and (state["charts"] >= charts or busy)

        result = await self.settle(done, started)
        if result:
            self.stats.latencies[f"{name} ({size})"].append(result[1])
        return self.check(name, result and result[0])

    async def masked_scan(self, size: str, leave: bool = False) -> bool:
        started = time.monotonic()
        await self.page.get_by_text("masked-marginals — exact").click()
        if leave:  # leave once the scan runs (its progress bar) or waits for a slot on the server
            job, start = self.page.get_by_text(SCAN_RUNNING), self.page.get_by_role("button", name=START)
            try:
                await job.or_(start).first.wait_for(timeout=self.timeout * 1000)
                if not await job.count():  # asked for first: ask for it, then leave while it runs
                    await start.click()
                    await job.first.wait_for(timeout=self.timeout * 1000)
                await asyncio.sleep(1.0)
                self.stats.closed_mid_job += 1
            except Exception:  # finished (or refused) before it was seen: not a mid-job close
                pass
            await self.close()
            return True

        def scanned(state):  # "Pseudo-perplexity", or "... of residues 1–500" for a range of a long record
            return any(m.startswith("Pseudo-perplexity") for m in state["metrics"])

        def asks(state):
            return any(START.match(b.strip().splitlines()[-1].strip()) for b in state["buttons"] if b.strip())

        def done(state):
            return scanned(state) or any(BUSY in w for w in state["warnings"]) or asks(state)

        result = await self.settle(done, started)
        if result and not scanned(result[0]) and asks(result[0]):
            # A scan estimated over 30 s at the measured rate is asked for first: ask for it.
            await self.page.get_by_role("button", name=START).click()
            result = await self.settle(lambda state: scanned(state) or any(BUSY in w for w in state["warnings"]),
                                       started)
        if result:
            busy = any(BUSY in w for w in result[0]["warnings"])
            self.stats.latencies[f"masked scan ({size})" + (" refused: busy" if busy else "")].append(result[1])
        ok = self.check("masked scan", result and result[0])
        await self.page.get_by_text("wt-marginals — fast").click()  # back to the fast scores
        await self.settle(lambda state: not scanned(state), time.monotonic())
        return ok

    async def run(self, deadline: float, rng: random.Random, closer: bool) -> None:
        await self.open()
        iteration = 0
        leave_next = False  # closers leave during every other masked scan of a medium/long input
        while time.monotonic() < deadline:
            iteration += 1
            kind = SCHEDULE[(self.index + iteration) % len(SCHEDULE)]
            invalid = INVALID[(self.index + iteration // len(SCHEDULE) + iteration) % len(INVALID)]
            uid = f"s{self.index}i{iteration}"
            text, ready_id, error = make_input(kind, invalid, uid, rng)
            label = f"paste ({kind})" if kind != "invalid" else f"paste (invalid: {invalid})"
            try:
                ok = await self.paste(text, ready_id, error, label)
                self.stats.iterations += 1
                if not ok or ready_id is None:
                    continue
                size = "short" if kind == "invalid" else kind
                for name in PAGES:
                    if time.monotonic() >= deadline:
                        break
                    await self.visit(name, size)
                    if name != "predictions" or time.monotonic() >= deadline:
                        continue
                    if closer and size != "short":
                        leave_next = not leave_next
                        if leave_next:
                            await self.masked_scan(size, leave=True)
                            await self.open()  # a new visitor arrives
                            break
                    if (iteration + self.index) % 3 == 0:
                        await self.masked_scan(size)
            except Exception as err:  # a Playwright failure: the page did not behave
                self.stats.fail(self.index, "browser", f"{type(err).__name__}: {err}")
                await self.close()
                await self.open()
        await self.close()


async def warm_up(browser, base: str, stats: Stats, timeout: float) -> None:
    """One visitor first: each length bucket compiles once per process (and is then kept in the
    persistent compilation cache); the load is measured on a warm server, the first visit apart."""
    scratch = Stats()
    session = Session(-1, browser, base, scratch, timeout)
    await session.open()
    for size in SIZES:
        text, ready_id, _ = make_input(size, "", f"warmup_{size}", random.Random(size))
        await session.paste(text, ready_id, None, f"paste ({size})")
        for name in PAGES:
            await session.visit(name, size)
            if name == "predictions":
                await session.masked_scan(size)
    await session.close()
    for action, values in scratch.latencies.items():
        stats.warmup[action] = values[0]
    for session_, what, detail in scratch.unexpected:
        stats.fail(session_, f"warm-up {what}", detail)


async def drive(base: str, args, stats: Stats) -> bool:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        if args.warmup:
            print("warming up (one visitor, each size once)", flush=True)
            await warm_up(browser, base, stats, args.action_timeout)
        deadline = time.monotonic() + args.duration
        sessions = [Session(i, browser, base, stats, args.action_timeout) for i in range(args.sessions)]
        runs = []
        if args.attacker:  # the hostile visitor of issue #26, beside the normal sessions
            from attacker import Attacker

            folder = Path(tempfile.mkdtemp(prefix="flamino-attacks-"))
            runs.append(asyncio.create_task(Attacker(browser, base, stats, args.action_timeout, folder).run(deadline)))
        for i, session in enumerate(sessions):
            closer = i < args.closers
            runs.append(asyncio.create_task(session.run(deadline, random.Random(1000 + i), closer)))
            await asyncio.sleep(1.0)  # arrivals spread over a few seconds
        try:
            await asyncio.wait_for(asyncio.gather(*runs), timeout=args.duration + 2 * args.action_timeout + 60)
        except asyncio.TimeoutError:
            stats.fail(-1, "run", "sessions did not finish in time")
        # After the load (and the abandoned scans): a new visitor must get a complete result.
        final = Session(99, browser, base, stats, args.action_timeout)
        await final.open()
        text, ready_id, _ = make_input("medium", "", "after_load", random.Random(7))
        after = await final.paste(text, ready_id, None, "paste (after the load)")
        after = after and await final.visit("predictions", "after the load")
        after = after and await final.masked_scan("after the load")
        await final.close()
        await browser.close()
        return after


async def watch_health(base: str, stats: Stats, stop: asyncio.Event) -> None:
    while not stop.is_set():
        if not await asyncio.to_thread(healthy, base):
            stats.health_failures += 1
        try:
            await asyncio.wait_for(stop.wait(), timeout=5)
        except asyncio.TimeoutError:
            pass


async def main_async(base: str, args, stats: Stats) -> bool:
    stop = asyncio.Event()
    health = asyncio.create_task(watch_health(base, stats, stop))
    try:
        return await drive(base, args, stats)
    finally:
        stop.set()
        await health


# --- report ---------------------------------------------------------------------------------------------
def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        names = re.findall(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu = names[0] if names else cpu
    except OSError:
        pass
    memory = ""
    try:
        import psutil

        memory = f", {psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    except ImportError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs{memory}, {platform.system()} {platform.release()}"


def versions() -> str:
    from importlib.metadata import version

    parts = [f"Python {platform.python_version()}"]
    for package in ("streamlit", "jax", "flax", "playwright"):
        try:
            parts.append(f"{package} {version(package)}")
        except Exception:
            pass
    return ", ".join(parts)


def server_log_problems(log: Path) -> list[str]:
    lines = log.read_text(errors="replace").splitlines()
    return [line for line in lines if "Traceback" in line or "page " in line and " failed" in line]


def abandoned_jobs(log: Path) -> int:
    """Heavy jobs the app stopped because their session went away (app_pages/_ui/results/one_record.py)."""
    return log.read_text(errors="replace").count("heavy job abandoned")


def report(args, stats: Stats, after_ok: bool, log_problems: list[str], abandoned: int, wall: float,
           command: str) -> str:
    rows = ["| action | n | p50 (s) | p90 (s) | p99 (s) | max (s) |", "|---|---:|---:|---:|---:|---:|"]
    for action in sorted(stats.latencies):
        values = stats.latencies[action]
        rows.append(
            f"| {action} | {len(values)} | {percentile(values, 50):.2f} | {percentile(values, 90):.2f} | "
            f"{percentile(values, 99):.2f} | {max(values):.2f} |"
        )
    warm = ", ".join(f"{action} {seconds:.1f} s" for action, seconds in sorted(stats.warmup.items()))
    server_cpu = sum(stats.server_cpu) / len(stats.server_cpu) if stats.server_cpu else float("nan")
    machine_cpu = sum(stats.machine_cpu) / len(stats.machine_cpu) if stats.machine_cpu else float("nan")
    rss = [r for _, r in stats.rss]
    quarters = [rss[min(len(rss) - 1, int(q * len(rss)))] / 2**20 for q in (0.25, 0.5, 0.75)] if rss else []
    over_time = ", ".join(f"{m:.0f}" for m in quarters)
    baseline = rss[0] / 2**20 if rss else float("nan")
    peak = max(rss) / 2**20 if rss else float("nan")
    end = rss[-1] / 2**20 if rss else float("nan")
    expected = ", ".join(f"{what}: {n}" for what, n in sorted(stats.expected.items())) or "none"
    unexpected = len(stats.unexpected) + stats.health_failures + len(log_problems) + (0 if after_ok else 1)
    lines = [
        f"Run of {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}: `{command}`",
        "",
        f"- machine: {machine()}; {versions()}",
        "- server: `streamlit run app.py`, FLAMINO_HOSTED=1, FLAMINO_MODEL=random:tiny (untrained, 2 layers), "
        "hosted defaults (1 heavy job at a time, 4 waiting, 2,000 residues per record)",
        f"- load: {args.sessions} concurrent headless Chromium sessions for {args.duration:.0f} s "
        + ("and an attacker tab (loadtest/attacker.py: the upload attacks of issue #26 and five tabs of a "
           "masked-map link, over and over; its rows start with 'attacker:') " if args.attacker else "") +
        f"(wall time {wall:.0f} s with start-up and the final check); {stats.iterations} inputs pasted; "
        f"{stats.closed_mid_job} session(s) closed while their masked scan was running or queued (the server "
        f"stopped {abandoned} abandoned heavy job(s) early)",
        "",
        *rows,
        "",
        f"- expected outcomes: {expected}",
        f"- **unexpected errors: {unexpected}** (page errors/timeouts {len(stats.unexpected)}, failed health "
        f"checks {stats.health_failures}, tracebacks in the server log {len(log_problems)}, final check "
        f"{'passed' if after_ok else 'FAILED'})",
        f"- server memory (RSS): {baseline:.0f} MiB after start-up, peak {peak:.0f} MiB, {end:.0f} MiB at the end "
        f"(at a quarter, half and three quarters of the run: {over_time} MiB)",
        f"- CPU: the server used {server_cpu:.0f}% of one CPU on average, the whole machine (server, "
        f"{args.sessions} browsers, anything else running) {machine_cpu:.0f}% of its {os.cpu_count()} CPUs; "
        f"1-minute load average {' then '.join(f'{x:.1f}' for x in stats.load)} (before the server "
        "started, at the end)",
        f"- warm-up before the load (one visitor, first compilations): {warm or 'skipped (--no-warmup)'}",
        "- after the load, a new session pasted a sequence, opened Masked predictions and ran the masked "
        f"scan: {'all complete' if after_ok else 'FAILED'}",
    ]
    for session, what, detail in stats.unexpected[:10]:
        lines.append(f"  - session {session}, {what}: {detail}")
    for line in log_problems[:5]:
        lines.append(f"  - server log: {line[:200]}")
    return "\n".join(lines) + "\n"


def write_report(path: Path, section: str, attacker: bool = False) -> None:
    """Replace the report's block in ``path`` (the run with an attacker tab has its own)."""
    begin, end_mark = (MARKER_BEGIN, MARKER_END) if not attacker else (ATTACKER_BEGIN, ATTACKER_END)
    block = f"{begin}\n{section}{end_mark}"
    if path.exists() and begin in path.read_text():
        text = path.read_text()
        start, end = text.index(begin), text.index(end_mark) + len(end_mark)
        path.write_text(text[:start] + block + text[end:])
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Reliability\n\n## Load test\n\n{block}\n")


# --- entry point ------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=180, help="seconds of load (default 180)")
    parser.add_argument("--sessions", type=int, default=8, help="concurrent browser sessions (default 8)")
    parser.add_argument("--action-timeout", type=float, default=180, help="seconds one step may take")
    parser.add_argument("--closers", type=int, default=3,
                        help="how many sessions close their page during every other masked scan (default 3)")
    parser.add_argument("--report", default="docs/reliability.md", help="markdown file to update, or 'none'")
    parser.add_argument("--attacker", action="store_true",
                        help="add a hostile tab (loadtest/attacker.py); reported in its own section")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="start the load on a cold server (first compilations inside the numbers)")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"needs {CHROMIUM} (apt-get install chromium)", file=sys.stderr)
        return 2
    command = " ".join(["python loadtest/run.py", *(argv if argv is not None else sys.argv[1:])])

    started = time.monotonic()
    stats = Stats()
    stats.load.append(os.getloadavg()[0])
    with tempfile.TemporaryDirectory(prefix="flamino-loadtest-") as tmp:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = Path(tmp) / "streamlit.log"
        server = start_server(port, Path(tmp) / "cache", log)
        # The watchdog: however the run goes, nothing outlives this bound.
        limit = args.duration + 420
        watchdog = threading.Timer(limit, lambda: (stop_server(server), os._exit(3)))
        watchdog.daemon = True
        watchdog.start()
        stop_sampling = threading.Event()
        try:
            wait_until_up(base, server, log)
            sampler = threading.Thread(target=sample_memory, args=(server.pid, stats, stop_sampling, started))
            sampler.start()
            print(f"server up at {base}; {args.sessions} sessions for {args.duration:.0f} s", flush=True)
            after_ok = asyncio.run(main_async(base, args, stats))
            if not healthy(base):
                stats.health_failures += 1
        finally:
            stop_sampling.set()
            stop_server(server)
            watchdog.cancel()
        stats.load.append(os.getloadavg()[0])
        problems = server_log_problems(log)
        abandoned = abandoned_jobs(log)
        if problems:
            (ROOT / "test-artifacts").mkdir(exist_ok=True)
            (ROOT / "test-artifacts" / "loadtest-server.log").write_text(log.read_text(errors="replace"))
    section = report(args, stats, after_ok, problems, abandoned, time.monotonic() - started, command)
    print(section)
    if args.report != "none":
        write_report(ROOT / args.report, section, args.attacker)
        print(f"updated {args.report}")
    bad = stats.unexpected or stats.health_failures or problems or not after_ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
