"""Idle CPU of a local server with one open tab: as `make run` starts it (watcher off via
.streamlit/config.toml) and with Streamlit's file watcher forced on, for comparison.

Run: `.venv/bin/python loadtest/idle_cpu.py` (needs Debian's chromium; about 2 minutes). The
figure is in docs/reliability.md; tests/browser/test_browser.py checks the first case stays under 10%.
"""
import os, subprocess, tempfile, time, urllib.request
import psutil
from playwright.sync_api import sync_playwright

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TMP = tempfile.mkdtemp(prefix="flamino-idle-")
def measure(extra, port, seconds=30.0):
    env = {**os.environ, "FLAMINO_MODEL": "random:tiny", "FLAMINO_CACHE": os.path.join(TMP, "cache"), "HF_HUB_OFFLINE": "1"}
    cmd = [f"{ROOT}/.venv/bin/streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true", *extra]
    server = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2); break
        except OSError:
            time.sleep(0.5)
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = b.new_page(); page.goto(url); page.get_by_text("Your sequences").wait_for(timeout=60000)
            page.wait_for_timeout(5000)
            proc = psutil.Process(server.pid)
            busy = lambda: sum(t.user + t.system for t in [proc.cpu_times()])
            load = os.getloadavg()[0]
            before = busy(); page.wait_for_timeout(seconds * 1000); used = (busy() - before) / seconds
            b.close()
        return used, load
    finally:
        server.terminate(); server.wait(10)

os.makedirs(TMP, exist_ok=True)
for label, extra in [("as `make run` starts it (watcher off)", []), ("file watcher forced on (--server.fileWatcherType auto)", ["--server.fileWatcherType", "auto"])]:
    used, load = measure(extra, 8621 if not extra else 8622)
    print(f"{label}: {100 * used:.1f}% of one core over 30 s (load average at start {load:.2f})")
