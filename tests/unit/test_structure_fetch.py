"""Fetching by PDB id / UniProt accession (structure_fetch.py) against a local server.

The network is closed here, and the tests must not depend on RCSB or the EBI: a small HTTP
server on 127.0.0.1 plays both, serving real files from ../shared/structures. It runs in a
thread for this module only and stops itself after a minute at most.
"""

from __future__ import annotations

import gzip
import http.server
import json
import socket
import threading
import time

import pytest
from structure_reference import STRUCTURES

from flamino_core.structure.files.fetch import FetchError, fetch_alphafold, fetch_pdb

pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")
SERVER_LIFETIME_S = 60
CAP = 200_000  # bytes; 1GBT.cif is 208,035 bytes, 1A7G.cif.gz is far smaller


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _send(self, body: bytes, content_type: str = "application/octet-stream", length: bool = True) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout, size cap), as these tests want it to

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self.path
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        if path == "/download/1A7G.cif.gz":
            self._send(gzip.compress((STRUCTURES / "1A7G.cif").read_bytes()))
        elif path == "/download/1GBT.cif.gz":  # 208 kB, sent uncompressed: over the cap, declared
            self._send((STRUCTURES / "1GBT.cif").read_bytes())
        elif path == "/download/4ZHL.cif.gz":  # over the cap, no Content-Length: read until the cap
            self.close_connection = True
            self._send((STRUCTURES / "4ZHL.cif").read_bytes(), length=False)
        elif path == "/download/2BEG.cif.gz":  # not a structure at all
            self._send(b"<html><body>Service unavailable</body></html>", "text/html")
        elif path == "/download/3SLW.cif.gz":  # answers after the client's timeout
            time.sleep(1.5)
            try:
                self._send(b"late")
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif path == "/api/prediction/P69905":
            entry = [{"entryId": "AF-P69905-F1", "cifUrl": f"{base}/files/model.cif"}]
            self._send(json.dumps(entry).encode(), "application/json")
        elif path == "/api/prediction/P12345":  # a link that is not http(s)
            self._send(json.dumps([{"cifUrl": "file:///etc/hostname"}]).encode(), "application/json")
        elif path == "/download/1ABC.cif.gz":  # promises 10,000 bytes, sends 10, hangs up
            self.send_response(200)
            self.send_header("Content-Length", "10000")
            self.end_headers()
            self.wfile.write(b"data_1ABC\n")
            self.close_connection = True
        elif path == "/api/prediction/Q9Y6K9":
            self._send(b"[]", "application/json")
        elif path == "/files/model.cif":  # a real file standing in for the model (transport only)
            self._send((STRUCTURES / "1A7G.cif").read_bytes())
        else:
            self.send_error(404)


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    stopper = threading.Timer(SERVER_LIFETIME_S, httpd.shutdown)  # never outlives a stuck test
    stopper.daemon = True
    stopper.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        stopper.cancel()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # free once closed: nothing listens there


def test_fetch_pdb_reads_the_download(server):
    parsed = fetch_pdb("1a7g", base_url=f"{server}/download", max_bytes=CAP)
    assert parsed.name == "1A7G.cif.gz" and parsed.chains()[0].n_amino_acids == 82


def test_unknown_entry(server):
    with pytest.raises(FetchError, match="PDB entry 9ZZZ was not found at 127.0.0.1"):
        fetch_pdb("9ZZZ", base_url=f"{server}/download")


def test_size_cap_with_and_without_a_declared_length(server):
    with pytest.raises(FetchError, match="larger than the 200,000-byte download limit .208,035 bytes."):
        fetch_pdb("1GBT", base_url=f"{server}/download", max_bytes=CAP)
    with pytest.raises(FetchError, match="larger than the 200,000-byte download limit .more than that."):
        fetch_pdb("4ZHL", base_url=f"{server}/download", max_bytes=CAP)


def test_timeout(server):
    started = time.monotonic()
    with pytest.raises(FetchError, match="in time .timeout 0.3 s."):
        fetch_pdb("3SLW", base_url=f"{server}/download", timeout=0.3)
    assert time.monotonic() - started < 1.4  # gave up before the server answered (1.5 s)


def test_download_that_is_not_a_structure(server):
    with pytest.raises(FetchError, match="not a usable structure.*not a PDB or mmCIF"):
        fetch_pdb("2BEG", base_url=f"{server}/download")


def test_offline_message():
    with pytest.raises(FetchError, match="could not reach 127.0.0.1:.*offline.*upload it instead"):
        fetch_pdb("1GBT", base_url=f"http://127.0.0.1:{_closed_port()}/download", timeout=2)
    with pytest.raises(FetchError, match="could not reach"):
        fetch_alphafold("P69905", base_url=f"http://127.0.0.1:{_closed_port()}/api/prediction", timeout=2)


def test_alphafold_follows_the_api_answer(server):
    parsed = fetch_alphafold("p69905", base_url=f"{server}/api/prediction")
    assert parsed.name == "model.cif" and parsed.chains()[0].chain_id == "E"
    with pytest.raises(FetchError, match="names no model file"):
        fetch_alphafold("Q9Y6K9", base_url=f"{server}/api/prediction")
    with pytest.raises(FetchError, match="AlphaFold DB entry A0A023GPI8 was not found"):
        fetch_alphafold("A0A023GPI8", base_url=f"{server}/api/prediction")


def test_download_that_breaks_off(server):
    with pytest.raises(FetchError, match="broke off .IncompleteRead."):
        fetch_pdb("1ABC", base_url=f"{server}/download")


def test_only_http_links_are_followed(server):
    with pytest.raises(FetchError, match="only http and https links are followed"):
        fetch_alphafold("P12345", base_url=f"{server}/api/prediction")


def test_malformed_identifiers_never_reach_the_network():
    for bad in ("ABCD", "1GB", "1GBT.cif", "../etc"):
        with pytest.raises(FetchError, match="is not a PDB id"):
            fetch_pdb(bad, base_url="http://127.0.0.1:9/never")
    for bad in ("hello", "P6990", "1GBT"):
        with pytest.raises(FetchError, match="is not a UniProt accession"):
            fetch_alphafold(bad, base_url="http://127.0.0.1:9/never")
