"""Issue #53 row 4: Streamlit's ``PUT /_stcore/upload_file`` flooded from raw WebSocket sessions
(no browser), against a running server: the memory the server holds, and when it lets it go.

    .venv/bin/python benchmarks/upload_flood.py URL PID [--sessions 30] [--puts 16] [--bytes 2000000]

Each session is a WebSocket on ``/_stcore/stream`` that asks for one script run (as a browser
does, so the server names the session), then PUTs ``--puts`` files of ``--bytes`` each (2 MB: under the 2 MiB cap with the form's
headers) into it with
the XSRF cookie a page load hands out (``--forged-addresses``: each session a visitor of its own,
by a forged ``X-Forwarded-For``, as many addresses would be). The sockets are then closed, and the server's resident
memory (PID) is followed until it is back within 10% of the growth or ``--follow`` seconds pass.
``benchmarks/hostile_visitor.py flood`` runs this against the hosted server it starts.
"""

from __future__ import annotations

import argparse
import asyncio
import http.cookiejar
import json
import time
import urllib.request
import uuid

import psutil
import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg


def xsrf_cookie(url: str) -> str:
    """The ``_streamlit_xsrf`` cookie the health check sets, as the page's first request (what a
    PUT's ``X-Xsrftoken`` must match)."""
    jar = http.cookiejar.CookieJar()
    urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar)).open(url + "/_stcore/health", timeout=60).read()
    return next(cookie.value for cookie in jar if cookie.name == "_streamlit_xsrf")


async def open_session(url: str, address: str | None = None) -> tuple[websockets.ClientConnection, str]:
    """A WebSocket session and its id (the ``new_session`` message of its first script run);
    ``address``: an ``X-Forwarded-For`` value the client forges (a server whose operator named
    that header, ``FLAMINO_VISITOR_HEADER``, with no proxy overwriting it, counts it a visitor)."""
    socket = await websockets.connect(url.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                                      max_size=None, open_timeout=120,
                                      additional_headers={"X-Forwarded-For": address} if address else None)  # fmt: skip
    rerun = BackMsg()
    rerun.rerun_script.query_string = ""
    await socket.send(rerun.SerializeToString())
    while True:
        message = ForwardMsg()
        message.ParseFromString(await asyncio.wait_for(socket.recv(), 300))
        if message.WhichOneof("type") == "new_session":
            return socket, message.new_session.initialize.session_id


def _multipart(payload: bytes, name: str) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()  # fmt: skip
    return head + payload + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def put(url: str, session: str, cookie: str, payload: bytes, n: int) -> int:
    body, kind = _multipart(payload, f"flood-{n}.bin")
    request = urllib.request.Request(f"{url}/_stcore/upload_file/{session}/flood-{n}", data=body, method="PUT",
                                     headers={"Content-Type": kind, "X-Xsrftoken": cookie,
                                              "Cookie": f"_streamlit_xsrf={cookie}"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


async def flood(url: str, pid: int, sessions: int, puts: int, size: int, follow: float, forged: bool = False) -> dict:
    server = psutil.Process(pid)
    rss = lambda: server.memory_info().rss  # noqa: E731
    cookie, payload = xsrf_cookie(url), b"x" * size
    before, started = rss(), time.monotonic()
    opened = [await open_session(url, f"198.51.100.{i % 250 + 1}" if forged else None) for i in range(sessions)]
    after_sessions = rss()
    statuses: dict[int, int] = {}
    peak = after_sessions
    for _, session in opened:
        for n in range(puts):
            status = await asyncio.to_thread(put, url, session, cookie, payload, n)
            statuses[status] = statuses.get(status, 0) + 1
            peak = max(peak, rss())
    flooded_s, held = time.monotonic() - started, rss()
    for socket, _ in opened:
        await socket.close()
    closed = time.monotonic()
    released_s, trace = None, []
    while time.monotonic() - closed < follow:
        await asyncio.sleep(1)
        now = rss()
        trace.append((round(time.monotonic() - closed), round((now - before) / 2**20)))
        if released_s is None and now - before <= 0.1 * max(held - before, 1) + 32 * 2**20:
            released_s = time.monotonic() - closed
            break
    mb = lambda b: round(b / 2**20)  # noqa: E731
    return {"sessions": sessions, "forged_addresses": forged, "puts_each": puts, "bytes_each": size,
            "statuses": statuses,
            "rss_before_mib": mb(before), "sessions_growth_mib": mb(after_sessions - before),
            "peak_growth_mib": mb(peak - before), "held_growth_mib": mb(held - before), "flood_s": round(flooded_s, 1),
            "released_after_close_s": None if released_s is None else round(released_s, 1),
            "growth_at_end_mib": mb(rss() - before), "trace_s_mib": trace[::10]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("pid", type=int)
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--puts", type=int, default=16)
    parser.add_argument("--bytes", type=int, default=2_000_000)
    parser.add_argument("--follow", type=float, default=300.0, help="seconds to follow the memory after closing")
    parser.add_argument("--forged-addresses", action="store_true",
                        help="each session forges an X-Forwarded-For address of its own (the server trusting it)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(flood(args.url, args.pid, args.sessions, args.puts, args.bytes, args.follow,
                                       args.forged_addresses))))


if __name__ == "__main__":
    main()
