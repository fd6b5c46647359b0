"""Shareable links and the view registry they read: round trips, and garbage query strings that
must give None, never raise."""

from __future__ import annotations

import base64
import random
import urllib.parse
import zlib

import pytest

from app_pages._ui.frame.links import (
    MAX_FASTA_CHARS,
    SharedView,
    decode_fasta,
    decode_view,
    encode_fasta,
    encode_view,
)
from app_pages._ui.frame.views import OPTIONS, PAGES, Choice, Flag, Integer, Span, Text, Word, page_options

HBB = (
    ">HBB_HUMAN Human beta hemoglobin.\n"
    "VHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKV\n"
    "KAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDKLHVDPENFRLLGNVLVCVLAHHFGK\n"
    "EFTPPVQAAYQKVVAGVANALAHKYH\n"
)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def test_fasta_round_trip_is_url_safe_and_compact():
    token = encode_fasta(HBB)
    assert decode_fasta(token) == HBB
    assert urllib.parse.quote(token, safe="") == token  # nothing to percent-encode
    # Residues carry ~4.3 bits each; after zlib and base64 a long sequence still gets shorter.
    rng = random.Random(0)
    long = ">long\n" + "".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(2000)) + "\n"
    assert len(encode_fasta(long)) < 0.8 * len(long)
    unicode = ">β-globin ünïcode\nMKT\n"
    assert decode_fasta(encode_fasta(unicode)) == unicode


def test_token_is_zlib_then_base64url_so_other_tools_can_read_it():
    token = encode_fasta(HBB)
    assert zlib.decompress(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))).decode() == HBB
    assert decode_fasta(b64url(zlib.compress(b">x\nMK\n"))) == ">x\nMK\n"


@pytest.mark.parametrize(
    "token",
    [
        "",
        "!!!!",
        "abc",  # valid base64 alphabet, not zlib
        "a",  # impossible base64 length
        encode_fasta(HBB)[:-4],  # cut short when copied
        encode_fasta(HBB) + "AAAA",  # trailing garbage
        b64url(zlib.compress(b"\xff\xfe not utf-8")),
        b64url(zlib.compress(b"   \n ")),  # nothing in it
        b64url(zlib.compress(b">x\x00\nMK")),
        "A" * 100_000,  # longer than any link we make
        None,
        123,
    ],
)
def test_bad_tokens_decode_to_none(token):
    assert decode_fasta(token) is None


def test_decompression_bomb_is_refused_without_inflating_it():
    bomb = b64url(zlib.compress(b"A" * (MAX_FASTA_CHARS * 4 + 10), 9))
    assert len(bomb) < 2_000
    assert decode_fasta(bomb) is None
    just_fits = b64url(zlib.compress(b">x\n" + b"M" * (MAX_FASTA_CHARS - 10), 9))
    assert decode_fasta(just_fits) is not None


def test_view_round_trip_through_a_real_query_string():
    view = SharedView(
        model="random:tiny",
        page="attention",
        fasta=HBB,
        record="HBB_HUMAN",
        options={"alayer": 2, "head": 0, "apc": True, "special": False},
    )
    query = urllib.parse.urlencode(encode_view(view))
    parsed = dict(urllib.parse.parse_qsl(query))
    assert decode_view(parsed) == view


def test_every_option_survives_a_round_trip():
    samples = {
        "pos": 12, "k": 20, "scan": "masked-marginals", "elayer": 0, "dims": "3", "colour": "class",
        "alayer": 33, "head": 20, "apc": False, "special": True, "first": -12, "win": 1501, "range": (1, 1),
        "schain": "AB1", "smodel": 3, "srange": "long", "scut": "L/5", "strack": "attention", "saa": "W",
        "sres": 17, "slayer": 0, "shead": 2, "spc": 3, "sscore": "masked-marginals", "sid": "1GBT",
        "smap": "umap", "slabels": False, "dna": True,
        "vinput": "dms", "vnumbering": "sequence", "vstrategy": "pll", "muts": "E6V\nK17E:E6V, p.(Glu6Val)", "mlong": True, "vmap": "masked-marginals",
        "veffect": "below", "vfrom": 3, "vto": 70, "singles": True, "dmswt": "record", "pfeat": "augmented", "pwt": "record",
    }  # fmt: skip
    assert set(samples) == set(OPTIONS)
    view = SharedView(page="predictions", options=samples)
    assert decode_view(encode_view(view)) == view


def test_strategies_are_named_as_the_core_names_them_and_older_links_still_open():
    """Issue 21: one strategy vocabulary (options.STRATEGIES) in widgets and links; the values
    links wrote before (scan=wt, vmap=masked ...) open the same view."""
    from flamino_core.options import STRATEGIES, scoring_strategies

    for key in ("scan", "vmap", "sscore"):
        assert set(OPTIONS[key].kind.labels) <= set(STRATEGIES), key
    assert tuple(OPTIONS["vstrategy"].kind.labels) == scoring_strategies()
    old = decode_view({"page": "variants", "scan": "masked", "vmap": "wt"})
    assert old.options == {"scan": "masked-marginals", "vmap": "wt-marginals"}
    assert decode_view({"scan": "wt"}).options == {"scan": "wt-marginals"}
    assert encode_view(old)["scan"] == "masked-marginals"  # links written now use the core's names


def test_encode_refuses_values_decode_would_drop():
    with pytest.raises(ValueError, match="unknown page"):
        encode_view(SharedView(page="admin"))
    with pytest.raises(ValueError, match="unknown view option"):
        encode_view(SharedView(options={"evil": 1}))
    with pytest.raises(ValueError, match="would not survive"):
        encode_view(SharedView(options={"k": 99}))
    assert encode_view(SharedView(model="m", options={"k": None})) == {"model": "m"}


def test_plain_sequence_links_for_people_writing_urls_by_hand():
    assert decode_view({"seq": "MKTAYIAK"}).fasta == "MKTAYIAK"
    assert decode_view({"seq": "MKT AYIAK"}) is None
    assert decode_view({"seq": "<script>"}) is None


def test_invalid_fields_are_dropped_individually():
    view = decode_view(
        {
            "page": "nowhere",
            "pos": "-3",
            "k": "21",
            "head": "2",
            "apc": "yes",
            "model": "random:tiny",
            "x": "1",
        }
    )
    assert view == SharedView(model="random:tiny", options={"head": 2})


def test_repeated_keys_take_the_last_value_like_streamlit():
    assert decode_view({"page": ["input", "embeddings"]}).page == "embeddings"


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"utm_source": "mail"},
        {"fasta": "garbage"},  # a link whose sequence is unreadable must not show anything else
        {"fasta": "garbage", "model": "random:tiny", "page": "predictions"},
        {"page": "nowhere", "pos": "x", "k": "1e3"},
        {"model": "a\x00b"},
        {"model": "m" * 10_000},
        {"record": "r\nx"},
        {"pos": "9" * 50},
        {"page": []},
        {"page": None},
        {"page": 3},
        {1: "x"},
        "not a mapping",
        None,
    ],
)
def test_garbage_queries_decode_to_none(params):
    assert decode_view(params) is None


def test_registry_options_belong_to_pages_and_their_defaults_survive_a_link():
    for option in OPTIONS.values():
        assert option.page is None or option.page in PAGES, option.key
        if option.default is not None:
            view = SharedView(page=option.page, options={option.key: option.default})
            assert decode_view(encode_view(view)) == view, option.key
    carried = [option.key for page in PAGES for option in page_options(page) if option.page is not None]
    own = [key for key, option in OPTIONS.items() if option.page is not None]
    assert sorted(carried) == sorted(own)  # each page's own option is carried by that page's link
    everywhere = {key for key, option in OPTIONS.items() if option.page is None}
    assert everywhere == {"first", "win", "range", "dna"}  # numbering, range, the DNA choice: every page's
    assert all(everywhere <= {option.key for option in page_options(page)} for page in PAGES)


@pytest.mark.parametrize(
    "kind, good, bad",
    [
        (Integer(1, 20), {"1": 1, "20": 20, "07": 7}, ["0", "21", "-1", "1.0", "1e1", " 3", "", "123456789"]),
        (Choice({"wt": "fast", "masked": "exact"}), {"wt": "wt", "masked": "masked"}, ["WT", "fast", ""]),
        (Flag(), {"1": True, "0": False}, ["true", "yes", "2", ""]),
        (Word(), {"A": "A", "b2": "b2", "A-2": "A-2", "best": "best"}, ["", "A B", "ABCDEFGHI", "A;", "<b>", "A\n"]),
        (Text(12), {"E6V\nK17E": "E6V\nK17E", "p.[Glu6Val]": "p.[Glu6Val]"}, ["", "E6V," * 4, "E6V\x00", "\x1b[2J"]),
        (Integer(-5, 5), {"-5": -5, "0": 0, "5": 5, "-0": 0}, ["-6", "6", "--1", "+1", "1-", ""]),
        (Span(), {"1-1": (1, 1), "73-433": (73, 433), "007-8": (7, 8)},
         ["0-5", "5-4", "1", "1-", "-3-4", "1-2-3", "a-b", " 1-2", "1-123456789", ""]),
    ],
)
def test_option_kinds_parse_only_what_they_write(kind, good, bad):
    for text, value in good.items():
        assert kind.parse(text) == value and kind.valid(value)
        assert kind.parse(kind.format(value)) == value
    for text in bad:
        assert kind.parse(text) is None, text
    assert not kind.valid(None)
    assert isinstance(kind, Flag) or not kind.valid(True)  # a bool is never a number or a choice
