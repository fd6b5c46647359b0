"""The app's first page after a server start: seconds from ``streamlit run`` to the model ready.

    .venv/bin/python benchmarks/app_start.py MODEL [--rounds 3] [--other-tree DIR]

Starts the server as ``make run`` does (headless, on a free port of 127.0.0.1, with a warm
flamino cache and compile cache for MODEL: one untimed start first), opens the first page in
headless Chromium (Debian's, as tests/browser/test_browser.py drives it) and times until the sidebar
says how the model runs ("Runs on ...": the engine is loaded), which is what a visitor waits
for before anything computes. With ``--other-tree`` (a checkout of another revision) the two
trees start in turn, round after round, each with its own caches: an A/B on a shared machine.
A development tool; prints one line per start and the medians.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_once(tree: Path, model: str, cache: Path, browser) -> dict:
    port = _free_port()
    env = {**os.environ, "FLAMINO_MODEL": model, "FLAMINO_CACHE": str(cache), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(tree)}
    start = time.monotonic()
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                               "--server.port", str(port), "--server.address", "127.0.0.1",
                               "--browser.gatherUsageStats", "false"],
                              cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        while True:  # the server answers
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
            if server.poll() is not None or time.monotonic() - start > 600:
                raise SystemExit(f"the server in {tree} did not start")
        serving = time.monotonic() - start
        page = browser.new_page()
        page.goto(url)
        page.get_by_text("Runs on", exact=False).first.wait_for(timeout=600_000)
        ready = time.monotonic() - start
        page.close()
        return {"serving_s": serving, "model_ready_s": ready}
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--other-tree", default=None, help="a checkout of another revision, started in turn")
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    trees = {"this": REPO, **({"other": Path(args.other_tree).resolve()} if args.other_tree else {})}
    work = Path(tempfile.mkdtemp(prefix="app-start-"))
    times: dict[str, list[dict]] = {name: [] for name in trees}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for name, tree in trees.items():  # untimed: converts the weights, fills the compile cache
                start_once(tree, args.model, work / name, browser)
            for _ in range(args.rounds):
                for name, tree in trees.items():
                    times[name].append(start_once(tree, args.model, work / name, browser))
                    print(name, {k: round(v, 2) for k, v in times[name][-1].items()},
                          f"load {os.getloadavg()[0]:.1f}", flush=True)
        finally:
            browser.close()
    for name, runs in times.items():
        print(f"{name}: server answers after {statistics.median(r['serving_s'] for r in runs):.2f} s, model ready "
              f"after {statistics.median(r['model_ready_s'] for r in runs):.2f} s (medians of {len(runs)})")


if __name__ == "__main__":
    main()
