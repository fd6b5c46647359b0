"""Issue 50 row 15: a UniProt accession pasted on the Input page is fetched as its sequence (as
the Structure page fetches a model by accession), and offline the page says so plainly.

A local HTTP server stands in for rest.uniprot.org, answering with real UniProt FASTA records
(../shared/fasta/uniprot_two.fa, as downloaded from UniProt); offline is a closed port."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path

import pytest

from flamino_core.structure.files import fetch as uniprot_fetch
from flamino_core.inputs.fasta import parse_fasta_text
from flamino_core.structure.files.fetch import FetchError, fetch_fasta, pasted_accessions

TWO = Path(__file__).resolve().parents[3] / "shared" / "fasta" / "uniprot_two.fa"


def _records() -> dict[str, str]:
    """accession -> its FASTA record as UniProt serves it (``>sp|P55685|...``)."""
    chunks = [">" + c for c in TWO.read_text().split(">") if c.strip()]
    return {chunk.split("|")[1]: chunk for chunk in chunks}


class _UniProt(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        accession = self.path.rsplit("/", 1)[-1].removesuffix(".fasta")
        body = _records().get(accession, "").encode()
        self.send_response(200 if body else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def uniprot():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _UniProt)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/uniprotkb"
    httpd.shutdown()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # free once closed: nothing listens there


@pytest.mark.parametrize("text, expected", [
    ("P69905", ["P69905"]), (" p69905 \n", ["P69905"]), ("P69905, P68871;P69905", ["P69905", "P68871"]),
    ("A0A023GPI8", ["A0A023GPI8"]),
    ("MVLSPADKTNVKAAW", []), (">P69905\nMVLS", []), ("P69905 MVLSPADKTNVKAAW", []), ("", []), ("1GBT", []),
])
def test_only_a_text_of_accessions_is_taken_for_accessions(text, expected):
    assert pasted_accessions(text) == expected


def test_the_fetched_record_is_uniprots_fasta(uniprot):
    expected = _records()
    for accession, record in expected.items():
        fetched = fetch_fasta(accession.lower(), base_url=uniprot)
        assert fetched.strip() == record.strip()
        (parsed,) = parse_fasta_text(fetched).records  # what the Input page then reads
        assert parsed.sequence == "".join(record.splitlines()[1:])


def test_an_unknown_accession_and_offline_are_said_plainly(uniprot):
    with pytest.raises(FetchError, match="UniProt entry Q99999 was not found"):
        fetch_fasta("Q99999", base_url=uniprot)
    with pytest.raises(FetchError, match="could not reach 127.0.0.1:.*may be offline"):
        fetch_fasta("P69905", base_url=f"http://127.0.0.1:{_closed_port()}/uniprotkb", timeout=2)
    with pytest.raises(FetchError, match="not a UniProt accession"):
        fetch_fasta("not an accession", base_url=uniprot)


def test_the_input_page_fetches_a_pasted_accession_and_says_when_it_cannot(uniprot, monkeypatch, tmp_path):
    from test_app import assert_clean, paste, start

    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))  # test_app's settings
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    accession, record = next(iter(_records().items()))
    monkeypatch.setattr(uniprot_fetch, "UNIPROT_REST", f"http://127.0.0.1:{_closed_port()}/uniprotkb")
    at = paste(start(), accession)
    # #66 D11: UniProt out of reach: said at once, with no Fetch button whose press can only fail
    assert any(f"{accession} is a UniProt accession" in i.value and "cannot reach UniProt" in i.value
               for i in at.info)
    assert not any(b.label == f"Fetch {accession} from UniProt" for b in at.button)
    assert at.text_area(key="_w_fasta_text").value == accession

    monkeypatch.setattr(uniprot_fetch, "UNIPROT_REST", uniprot)
    at = at.run()
    # Reachable, yet the fetch fails (the server goes away between the offer and the press): said.
    monkeypatch.setattr(uniprot_fetch, "UNIPROT_REST", f"http://127.0.0.1:{_closed_port()}/gone")
    at = next(b for b in at.button if b.label == f"Fetch {accession} from UniProt").click().run()
    assert any("may be offline" in e.value for e in at.error)  # said, the text kept
    assert at.text_area(key="_w_fasta_text").value == accession
    monkeypatch.setattr(uniprot_fetch, "UNIPROT_REST", uniprot)
    at = at.run()
    at = next(b for b in at.button if b.label == f"Fetch {accession} from UniProt").click().run()
    assert_clean(at)
    assert at.text_area(key="_w_fasta_text").value.strip() == record.strip()
    assert list(at.dataframe[0].value["id"]) == [record[1:].split()[0]]
    assert not any("may be offline" in e.value for e in at.error)
