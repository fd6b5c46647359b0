"""The page context (issue 21 item 4): each rerun reads the input once and looks the engine up
once, whatever the page; the Input page names the pages of the registry."""

from __future__ import annotations

import pytest

from app_pages._ui.input import reading as inputs, model_loading as models
from app_pages._ui.frame.views import PAGES
from test_app import UBIQUITIN, assert_clean, environment, open_page, paste, start, unescaped  # noqa: F401

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
TWO = f">ubiquitin\n{UBIQUITIN}\n>other/5-40\n{UBIQUITIN[4:40]}\n"


@pytest.fixture
def counted(monkeypatch):
    """Calls of the input's parser and of the engine lookup, as the app makes them."""
    calls = {"parse": 0, "engine": 0}
    parse, lookup = inputs.parse_input, models.active_engine

    def parse_counted(*args, **kwargs):
        calls["parse"] += 1
        return parse(*args, **kwargs)

    def lookup_counted(*args, **kwargs):
        calls["engine"] += 1
        return lookup(*args, **kwargs)

    monkeypatch.setattr(inputs, "parse_input", parse_counted)
    monkeypatch.setattr(models, "active_engine", lookup_counted)
    return calls


@pytest.mark.parametrize("page", [key for key in PAGES if key != "input"])
def test_one_parse_and_one_engine_lookup_per_rerun_on_every_page(page, counted):
    at = open_page(paste(start(), TWO), page)  # the first run of a page computes its results
    assert_clean(at)
    for _ in range(2):  # a rerun: as when the user moves a widget
        counted.update(parse=0, engine=0)
        at.run()
        assert_clean(at)
        assert counted == {"parse": 1, "engine": 1}, page
    at.sidebar.selectbox(key="_w_record").set_value("other/5-40")
    counted.update(parse=0, engine=0)
    at.run()  # another record: still one of each
    assert_clean(at)
    assert counted == {"parse": 1, "engine": 1}, page


def test_the_input_page_names_every_page_of_the_registry_in_menu_order():
    at = start()
    (intro,) = [m.value for m in at.markdown if "open any page in the menu" in m.value]
    places = [unescaped(intro).index(f"**{page.title}**") for key, page in PAGES.items() if key != "input"]
    assert places == sorted(places)
