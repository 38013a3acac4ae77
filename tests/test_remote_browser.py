"""Remote browsers (issue 42): the browser_* keys, run-wide and per source, and what they refuse."""

import textwrap

import pytest

from scraper.base import endpoints, sources
from scraper.base import settings as settings_mod
from scraper.base.errors import ConfigError
from scraper.db import store
from tests.helpers import invoke

TOKEN = "tok-5f3a9c"


@pytest.mark.parametrize(("value", "said"), [
    ("browserbase", "browser_endpoint 'browserbase' is not supported yet; use local or cdp:URL."),
    ("playwright:ws://127.0.0.1:3000/", "browser_endpoint 'playwright:WS-URL' is not supported yet; use local or "
                                        "cdp:URL."),
    ("cdp:ftp://127.0.0.1/?token=" + TOKEN, "cdp: must be followed by an http(s) or ws(s) URL."),
    ("chrome", "it must be local, cdp:URL"),
])
def test_an_endpoint_the_code_cannot_honour_is_one_sentence_naming_no_secret(value, said):
    with pytest.raises(ConfigError) as e:
        settings_mod.build(browser_endpoint=value)
    assert said in str(e.value) and TOKEN not in str(e.value) and "\n" not in str(e.value)


def test_the_browserbase_keys_are_refused_not_ignored_until_browserbase_is_supported():
    for values in ({"browserbase_url": "http://127.0.0.1:9/"}, {"browserbase_key": TOKEN}):
        with pytest.raises(ConfigError, match="not supported yet") as e:
            settings_mod.build(**values)
        assert TOKEN not in str(e.value)


def test_a_cdp_endpoint_is_shown_without_its_token_and_connects_with_it(tmp_path, monkeypatch):
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    url = f"http://user:pw@127.0.0.1:9222/?token={TOKEN}"
    monkeypatch.setenv("SCRAPER_BROWSER_ENDPOINT", "cdp:" + url)
    monkeypatch.setenv("SCRAPER_BROWSER_SESSIONS", "3")
    shown = invoke("config", "--json", db=db)
    assert shown.exit_code == 0, shown.output
    assert TOKEN not in shown.output and "pw@" not in shown.output and "token=***" in shown.output
    s = settings_mod.load()[0]
    assert s.browser_endpoint.url == url and s.browser_endpoint.remote and s.browser_sessions == 3
    assert TOKEN not in repr(s) and TOKEN not in str(s.browser_endpoint)


def test_the_browserbase_key_from_the_environment_is_never_shown(tmp_path, monkeypatch):
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    monkeypatch.setenv("SCRAPER_BROWSERBASE_KEY", TOKEN)
    said = invoke("config", "--json", db=db)
    assert said.exit_code == 2 and "not supported yet" in said.output and TOKEN not in said.output


def write_sources(tmp_path, extra):
    path = tmp_path / "sources.toml"
    path.write_text(textwrap.dedent("""
        [[source]]
        name = "events"
        kind = "catalogue"
        site = "http://127.0.0.1:1/"
        fetcher = "browser"
    """) + textwrap.dedent(extra))
    return str(path)


@pytest.mark.parametrize(("extra", "said"), [
    ('browser_endpoint = "browserbase"', "key 'browser_endpoint' is 'browserbase'; browser_endpoint "
                                         "'browserbase' is not supported yet; use local or cdp:URL."),
    (f'browser_endpoint = "cdp:nothing?token={TOKEN}"', "cdp: must be followed by an http(s) or ws(s) URL."),
    ("browser_sessions = 0", "key 'browser_sessions' is 0; it must be a whole number, 1 or more."),
    ("browser_session_pages = true", "key 'browser_session_pages' is True; it must be a whole number"),
    ("browser_session_timeout = -1", "key 'browser_session_timeout' is -1; it must be a number of seconds"),
    ('browserbase_url = "http://127.0.0.1:9/"', "it serves browser_endpoint 'browserbase', which is not supported"),
])
def test_a_sources_bad_browser_key_is_one_sentence_naming_the_file_and_source(tmp_path, extra, said):
    path = write_sources(tmp_path, extra)
    with pytest.raises(ConfigError) as e:
        sources.load(path)
    assert said in str(e.value) and path in str(e.value) and "'events'" in str(e.value)
    assert TOKEN not in str(e.value)


def test_a_sources_own_browser_keys_win_over_the_runs(tmp_path):
    path = write_sources(tmp_path, """
        browser_endpoint = "cdp:http://127.0.0.1:9222"
        browser_session_pages = 7
        browser_session_timeout = 30
    """)
    s = settings_mod.build(sources=sources.load(path), sources_path=path, browser_sessions=4)
    plan = s.browser
    assert plan.endpoint.kind == "cdp" and plan.endpoint.url == "http://127.0.0.1:9222"
    assert (plan.sessions, plan.session_pages, plan.session_timeout_s) == (4, 7, 30.0)
    # a remote source needs no Chromium here: none is looked for
    from scraper.net import chromium
    assert chromium.sources_without_browser(
        settings_mod.build(sources=s.sources, browser_path="/nonexistent/chromium"), s.sources) == (None, ())


def test_two_sources_asking_for_different_browsers_are_refused_before_any_work(tmp_path):
    path = write_sources(tmp_path, """
        browser_endpoint = "cdp:http://127.0.0.1:9222"

        [[source]]
        name = "shop"
        kind = "catalogue"
        site = "http://127.0.0.2:1/"
        fetcher = "auto"
    """)
    db = str(tmp_path / "jobs.db")
    store.open_db(db).close()
    said = invoke("--sources", path, "run", db=db)
    assert said.exit_code == 2
    assert "source events renders with cdp:http://127.0.0.1:9222 and source shop with local" in said.output
    assert "run them apart with --source" in said.output
    s = settings_mod.build(sources=sources.load(path), sources_path=path, run_sources=("shop",))
    assert s.browser.endpoint == endpoints.Endpoint("local")
