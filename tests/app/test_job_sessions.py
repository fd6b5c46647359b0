"""A job stops when its browser is gone, even while Streamlit still lists the session as connected
(``background.GONE_AFTER_S``): a CI run saw a resumed fit go on for 600 s after its tab closed."""

from __future__ import annotations

import logging

import pytest

from app_pages._ui.server import background
from flamino_core.jobs.background import Job


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    """The module's time, moved by the test; a runtime that lists every session as connected
    (the socket that lingers), and a session id the test sets."""
    from streamlit.runtime import Runtime

    clock = _Clock()
    monkeypatch.setattr(background, "_monotonic", clock)
    monkeypatch.setattr(Runtime, "exists", staticmethod(lambda: True))
    monkeypatch.setattr(Runtime, "instance", staticmethod(lambda: type("R", (), {"is_active_session": lambda self, s: True})()))
    monkeypatch.setattr(background, "_SEEN", {})
    monkeypatch.setattr(background, "_RUNNING", {})
    monkeypatch.setattr(background, "session_id", lambda: "tab-1")
    return clock


def test_a_job_goes_on_while_its_browser_runs_the_app_and_stops_once_it_has_not(clock, caplog):
    job = Job("Fitting the predictor", "fits", 10, session="tab-1")
    assert not background.should_stop(job)  # never seen: a job started outside a browser run
    with background.browser_run():
        clock.now += 10 * background.GONE_AFTER_S  # a long page run is not silence
        assert not background.should_stop(job)
    clock.now += background.GONE_AFTER_S - 1  # the watcher's last run, just under the limit ago
    assert not background.should_stop(job)
    clock.now += 2
    with caplog.at_level(logging.WARNING, logger="flamino"):
        assert background.should_stop(job)
    assert job.cancelled()
    assert "heavy job abandoned (Fitting the predictor): its session closed" in caplog.text


def test_another_sessions_runs_do_not_keep_a_job_alive(clock):
    job = Job("Pseudo-perplexity", "positions", 10, session="tab-1")
    with background.browser_run():
        pass
    clock.now += background.GONE_AFTER_S + 1
    background.session_id = lambda: "tab-2"  # the fixture's monkeypatch undoes it after the test
    with background.browser_run():
        assert background.should_stop(job)


def test_long_gone_sessions_are_forgotten(clock):
    with background.browser_run():
        pass
    clock.now += 10 * background.GONE_AFTER_S + 1
    background.session_id = lambda: "tab-2"
    with background.browser_run():
        pass
    assert set(background._SEEN) == {"tab-2"}
