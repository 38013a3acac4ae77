"""The configuration model (issue 26): every setting from defaults < scraper.toml's [scraper] < SCRAPER_<KEY> <
the command line, `scraper config` showing where each value came from, one sentence for every mistake, every
old flag still accepted, and commands loaded only when they run."""

import json
import logging
import re
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from scraper import cli
from scraper.base import config, settings
from tests import warm
from tests.helpers import ROOT, assert_one_sentence_error, in_process, scraper_env

OLD_HELP = ROOT / "tests" / "snapshots" / "help-before-issue-26.txt"

# one setting of every kind: (key, file value (TOML), environment value, command line value, each as shown)
LAYERS = [
    ("workers", ("3", 3), ("5", 5), ("7", 7)),
    ("rate", ("0.5", 0.5), ("1.5", 1.5), ("2.5", 2.5)),
    ("adaptive", ("false", False), ("1", True), ("off", False)),
    ("robots", ('"ignore"', "ignore"), ("obey", "obey"), ("ignore", "ignore")),
    ("robots_ignore", ('["a.example"]', ["a.example"]), ("b.example,c.example", ["b.example", "c.example"]),
     ("d.example", ["d.example"])),
    ("ping_url", ('"http://127.0.0.1:9/file"', "http://127.0.0.1:9/file"), ("http://127.0.0.1:9/env",
     "http://127.0.0.1:9/env"), ("http://127.0.0.1:9/cli", "http://127.0.0.1:9/cli")),
]


def config_json(*args, env=None):
    result = CliRunner().invoke(cli.main, [*args, "config", "--json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("key, file, env, command_line", LAYERS, ids=[layer[0] for layer in LAYERS])
def test_config_json_shows_each_layer_winning_over_the_one_below(tmp_path, monkeypatch, key, file, env,
                                                                 command_line):
    monkeypatch.chdir(tmp_path)
    name = settings.SPECS[key].env
    shown = config_json()
    assert shown["file"] is None
    assert shown["settings"][key] == {"value": settings.SPECS[key].show(settings.SPECS[key].default),
                                      "origin": "default"}
    (tmp_path / "scraper.toml").write_text(f"[scraper]\n{key} = {file[0]}\n")
    shown = config_json()
    assert shown["file"] == "./scraper.toml"
    assert shown["settings"][key] == {"value": file[1], "origin": "file"}
    assert config_json(env={name: env[0]})["settings"][key] == {"value": env[1], "origin": "env"}
    assert config_json("--set", f"{key}={command_line[0]}", env={name: env[0]})["settings"][key] == \
        {"value": command_line[1], "origin": "cli"}


def test_a_flag_is_the_command_line_too_and_the_file_can_be_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "etc.toml"
    elsewhere.write_text('[scraper]\nbrowser_path = "/file/chromium"\nlog_level = "warning"\n')
    shown = config_json("--config", str(elsewhere), "--browser-path", "/flag/chromium")
    assert shown["file"] == str(elsewhere)
    assert shown["settings"]["browser_path"] == {"value": "/flag/chromium", "origin": "cli"}
    assert shown["settings"]["log_level"] == {"value": "WARNING", "origin": "file"}
    shown = config_json(env={config.ENV_CONFIG: str(elsewhere)})
    assert shown["file"] == str(elsewhere) and shown["settings"]["browser_path"]["value"] == "/file/chromium"
    # the 12 environment names of earlier versions keep their meaning (SCRAPER_BROWSER names the browser_path)
    assert config_json(env={"SCRAPER_BROWSER": "/opt/chromium"})["settings"]["browser_path"] == \
        {"value": "/opt/chromium", "origin": "env"}


def test_config_text_lists_every_setting_with_its_origin(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scraper.toml").write_text("[scraper]\nburst = 3\n")
    result = CliRunner().invoke(cli.main, ["--set", "workers=2", "config"], env={"SCRAPER_RATE": "1"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "file: ./scraper.toml" and len(lines) == 1 + len(settings.SPECS)
    assert re.search(r"^burst +file +3$", result.output, re.M)
    assert re.search(r"^rate +env +1\.0$", result.output, re.M)
    assert re.search(r"^workers +cli +2$", result.output, re.M)
    assert re.search(r"^timeout +default +30\.0$", result.output, re.M)


def test_passwords_in_urls_are_shown_as_stars(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shown = config_json("--db", "postgresql://scraper:s3cret@127.0.0.1:5432/mirror",
                        "--set", "ping_url=https://ops:hunter2@127.0.0.1:9/ping")["settings"]
    assert shown["db"]["value"] == "postgresql://scraper:***@127.0.0.1:5432/mirror"
    assert shown["ping_url"]["value"] == "https://ops:***@127.0.0.1:9/ping"
    result = CliRunner().invoke(cli.main, ["--db", "postgresql://scraper:s3cret@127.0.0.1:5432/mirror", "config"])
    assert "s3cret" not in result.output and "scraper:***@" in result.output


@pytest.mark.parametrize("where, args, words", [
    ("file", [], ["scraper.toml", "'wrokers'", "the closest is 'workers'"]),
    ("set", ["--set", "brust=3"], ["--set brust=3", "'brust'", "the closest is 'burst'"]),
    ("set", ["--set", "zzzzzz=1"], ["'zzzzzz'", "`scraper config` lists them all"]),
])
def test_an_unknown_key_names_the_key_where_it_came_from_and_the_closest(tmp_path, monkeypatch, where, args,
                                                                        words):
    monkeypatch.chdir(tmp_path)
    if where == "file":
        (tmp_path / "scraper.toml").write_text("[scraper]\nwrokers = 3\n")
    for command in (["config"], ["status"], ["run"]):
        assert_one_sentence_error(CliRunner().invoke(cli.main, [*args, *command]), *words)


def test_an_unknown_scraper_variable_is_said_once_with_the_closest_and_a_known_one_never(tmp_path, monkeypatch):
    """A typo in a SCRAPER_* name was ignored without a word (issue 46); `update` reads its settings at each
    step, and says it once."""
    monkeypatch.chdir(tmp_path)
    env = {"SCRAPER_WORKRES": "3", "SCRAPER_ZZZZZZ": "1", "SCRAPER_BROWSER": "chromium", "SCRAPER_CONFIG": ""}
    nowhere = type("Site", (), {"url": "http://127.0.0.1:9", "api_url": "http://127.0.0.1:9/api"})
    said = in_process(nowhere, tmp_path / "jobs.db", "update", "--max-attempts", "1", env=env).stderr
    warned = [line for line in said.splitlines() if "is no setting of scraper" in line]
    assert [line.split("WARNING ", 1)[1] for line in warned] == [
        "the environment variable SCRAPER_WORKRES is no setting of scraper, so it is ignored; the closest is "
        "SCRAPER_WORKERS.",
        "the environment variable SCRAPER_ZZZZZZ is no setting of scraper, so it is ignored; `scraper config` "
        "lists every setting and its variable."]
    assert config.unknown_environment(settings.SPECS, {f"SCRAPER_{k.upper()}": "" for k in settings.SPECS}) == []


def test_log_level_comes_from_every_layer_before_the_command_reads_its_own(tmp_path, monkeypatch):
    """`--set log_level=DEBUG` did nothing for `discover` (the level was read from the environment alone,
    and discover reads only a few settings): now the file, the environment and --set all reach it."""
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", root.level)      # put back after the commands set it
    nowhere = type("Site", (), {"url": "http://127.0.0.1:9", "api_url": "http://127.0.0.1:9/api"})
    discover = ["discover", "http://127.0.0.1:9/", "--no-browser", "--timeout", "1"]
    assert " DEBUG " not in in_process(nowhere, tmp_path / "jobs.db", *discover).stderr
    for args, env in ((["--set", "log_level=DEBUG"], {}), ([], {"SCRAPER_LOG_LEVEL": "debug"})):
        said = in_process(nowhere, tmp_path / "jobs.db", *args, *discover, env=env).stderr
        assert " DEBUG Starting new HTTP connection" in said, said
    (tmp_path / "scraper.toml").write_text('[scraper]\nlog_level = "ERROR"\n')
    assert " INFO " not in in_process(nowhere, tmp_path / "jobs.db", "config", "--json").stderr + \
        in_process(nowhere, tmp_path / "jobs.db", "run").stderr


def test_discovers_rate_and_timeout_are_settings_of_their_own_still_spelled_as_before(tmp_path, monkeypatch):
    """Declared once, in the configuration model: `discover --rate/--timeout` (spelled as before, and
    --discover-rate/--discover-timeout), --set discover_rate=..., SCRAPER_DISCOVER_RATE; run's `rate` and
    `timeout` are other settings."""
    monkeypatch.chdir(tmp_path)
    shown = json.loads(CliRunner().invoke(cli.main, ["--set", "discover_rate=3", "config", "--json"],
                                          env={"SCRAPER_DISCOVER_TIMEOUT": "7"}).output)["settings"]
    assert (shown["discover_rate"]["value"], shown["discover_rate"]["origin"]) == (3.0, "cli")
    assert (shown["discover_timeout"]["value"], shown["discover_timeout"]["origin"]) == (7.0, "env")
    assert (shown["rate"]["value"], shown["timeout"]["value"]) == (settings.RATE_PER_S, settings.TIMEOUT_S)
    discover = ["discover", "http://127.0.0.2:9/", "--no-browser"]
    for args, env, words in ((["--set", "discover_rate=0", *discover], {}, ["--set discover_rate=0"]),
                             (discover, {"SCRAPER_DISCOVER_TIMEOUT": "abc"}, ["SCRAPER_DISCOVER_TIMEOUT"]),
                             ([*discover, "--rate", "0"], {}, ["discover_rate is '0'"]),
                             ([*discover, "--discover-timeout", "0"], {}, ["discover_timeout is '0'"])):
        assert_one_sentence_error(CliRunner().invoke(cli.main, args, env=env), *words)
    params = {o for p in cli.main.get_command(click.Context(cli.main), "discover").params for o in p.opts}
    assert {"--rate", "--discover-rate", "--timeout", "--discover-timeout"} <= params


@pytest.mark.parametrize("file, args, env, words", [
    ('rate = "fast"', [], {}, ["rate", "'fast'", "scraper.toml", "a number above 0"]),
    ("workers = 2.5", [], {}, ["workers", "2.5", "scraper.toml", "a whole number, 1 or more"]),
    ("", [], {"SCRAPER_ADAPTIVE": "maybe"}, ["adaptive", "'maybe'", "SCRAPER_ADAPTIVE", "true or false"]),
    ("", ["--set", "robots=sometimes"], {}, ["robots", "'sometimes'", "--set robots=sometimes", "obey, ignore"]),
    ("", ["--set", "ping_url=ftp://x"], {}, ["ping_url", "--set ping_url=ftp://x", "an http(s) URL"]),
    ('robots_ignore = ["bad/domain"]', [], {}, ["robots_ignore", "scraper.toml", "not a domain name"]),
    ("", ["run", "--timeout", "0"], {}, ["timeout", "'0'", "--timeout", "a number above 0"]),
    ("", ["--set", "workers"], {}, ["--set 'workers'", "KEY=VALUE"]),
    ("", ["--set", "workers=2", "--set", "workers=3"], {}, ["workers", "twice", "--set workers=2"]),
    ("", ["--set", "rate=3", "run", "--rate", "4"], {}, ["rate", "twice", "--set rate=3", "--rate"]),
    ("lease = 10", [], {}, ["lease", "longer than the timeout"]),
    ("[scraper]]", [], {}, ["scraper.toml", "not valid TOML"]),
])
def test_a_bad_value_is_one_sentence_naming_the_key_its_origin_and_what_is_allowed(tmp_path, monkeypatch, file,
                                                                                   args, env, words):
    monkeypatch.chdir(tmp_path)
    if file:
        (tmp_path / "scraper.toml").write_text(file if file.startswith("[") else f"[scraper]\n{file}\n")
    command = [] if "run" in args else ["config"]
    assert_one_sentence_error(CliRunner().invoke(cli.main, [*args, *command], env=env), *words)


def test_a_missing_config_file_is_one_sentence(tmp_path):
    assert_one_sentence_error(CliRunner().invoke(cli.main, ["--config", str(tmp_path / "no.toml"), "status"]),
                              "no.toml", "does not exist")


# --- the sources in the same file, and sources.toml as before -------------------------------------------

EVENTS = '[[source]]\nname = "events"\nkind = "catalogue"\nsite = "http://127.0.0.2:8001/"\n'


def sources_json(*args):
    result = CliRunner().invoke(cli.main, [*args, "sources", "--json"])
    assert result.exit_code == 0, result.output
    return [row["name"] for row in json.loads(result.output)]


def test_scraper_toml_may_hold_the_sources_and_sources_toml_works_as_before(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert sources_json() == ["n8n"]
    (tmp_path / "sources.toml").write_text(EVENTS.replace("events", "from-sources-toml"))
    assert sources_json() == ["from-sources-toml"]
    (tmp_path / "scraper.toml").write_text("[scraper]\nworkers = 2\n")      # no [[source]]: sources.toml still
    assert sources_json() == ["from-sources-toml"]
    (tmp_path / "scraper.toml").write_text("[scraper]\nworkers = 2\n\n" + EVENTS)
    assert sources_json() == ["events"]
    assert sources_json("--sources", "sources.toml") == ["from-sources-toml"]      # named: it wins


# --- every old flag still works, and run's help is short -----------------------------------------------

def old_flags():
    """[(command, flag, takes_value)] of every option in the --help snapshot before issue 26."""
    found = []
    for section in OLD_HELP.read_text().split("=== scraper ")[1:]:
        command = section.split(" --help", 1)[0].strip()
        for line in section.split("Options:\n", 1)[1].splitlines():
            m = re.match(r"^  (?:-\w, )?(--[a-z][a-z0-9-]*)(?: / (--[a-z-]+))?(?: (\S+))?", line)
            if m and m.group(1) not in ("--help", "--version"):
                found += [(command, flag, m.group(3) is not None) for flag in m.groups()[:2] if flag]
    return found


GOOD = {"--workers": "2", "--rate": "1.5", "--burst": "3", "--max-attempts": "2", "--memory-limit": "2048",
        "--timeout": "20", "--max-answer-mb": "10", "--lease": "100", "--max-jobs-per-worker": "50",
        "--breaker-failures": "5", "--breaker-open": "30", "--max-open-cycles": "2", "--give-up-after": "60",
        "--backoff-base": "0.5", "--transcript-languages": "en,de", "--domain-rate": "youtube.com=0.5/3",
        "--source": "n8n", "--ping-url": "http://127.0.0.1:9/ping", "--notify-url": "http://127.0.0.1:9/hook",
        "--robots": "ignore", "--robots-ignore": "youtube.com", "--retry-after": "12", "--api-url":
        "http://api.test/api", "--site-url": "http://site.test", "--user-agent": "scraper/test (+mailto:a@b.c)",
        "--youtube-url": "http://127.0.0.1:9", "--sources": "sources.toml", "--browser-path": "chromium",
        "--browser-timeout": "20", "--log-level": "debug", "--since": "2026-01-01", "--limit": "5",
        "--kind": "added", "--format": "csv", "--output": "out.csv", "--columns": "id,name", "--ids": "none.txt",
        "--older-than": "10", "--to": "postgresql://u@127.0.0.1:9/x", "--run": "1", "--host": "127.0.0.1",
        "--port": "8123", "--db": "jobs.db"}
# what each command needs to stop before any work on a folder without a database
BASE = {"": ["config", "--json"], "update": ["update", "--source", "nope"], "seed": ["seed", "--ids", "missing.txt"],
        "history": ["history", "1"], "search": ["search", "x"], "export": ["export", "--format", "json"],
        "report": ["report", "--output", "r.html"], "migrate": ["migrate", "--to", "postgresql://u@127.0.0.1:9/x"]}


def test_the_old_snapshot_is_read_whole():
    flags = old_flags()
    assert len(flags) >= 75 and ("run", "--no-adaptive", False) in flags and ("", "--browser-path", True) in flags


@pytest.mark.parametrize("command, flag, takes_value", old_flags(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_flag_of_the_old_help_snapshot_still_works(tmp_path, monkeypatch, command, flag, takes_value):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sources.toml").write_text('[[source]]\nname = "n8n"\nkind = "n8n"\n')
    given = [flag, GOOD[flag]] if takes_value else [flag]
    base = BASE.get(command, [command])
    args = [*given, *base] if command == "" else [*base, *given]
    result = CliRunner().invoke(cli.main, args)
    assert "No such option" not in result.output and "Traceback" not in result.output, result.output
    if result.exit_code != 0:
        assert_one_sentence_error(result)
    spec = next((s for s in settings.SPECS.values() if flag in (s.long_flag, "--no-" + s.long_flag[2:])), None)
    if command == "" and spec is not None:       # a global flag's value is the setting's, from the command line
        assert result.exit_code == 0 and json.loads(result.output)["settings"][spec.key]["origin"] == "cli"


BAD = {"int": "x", "float": "x", "choice": "nope", "url": "ftp://x", "list": "bad/domain!"}


@pytest.mark.parametrize("flag", sorted({f for c, f, value in old_flags() if value and c in ("run", "")}))
def test_an_old_flag_sets_its_settings_key(tmp_path, monkeypatch, flag):
    monkeypatch.chdir(tmp_path)
    spec = next((s for s in settings.SPECS.values() if s.long_flag == flag), None)
    if spec is None or spec.kind not in BAD:
        pytest.skip(f"{flag} is not a setting, or any text is a good value of it")
    bad = "x" if flag == "--domain-rate" else "en;x" if flag == "--transcript-languages" else BAD[spec.kind]
    args = [flag, bad, "config"] if flag in {f for c, f, _ in old_flags() if c == ""} else ["run", flag, bad]
    assert_one_sentence_error(CliRunner().invoke(cli.main, args), f"the setting {spec.key} is", f"(from {flag})")


def test_run_help_shows_at_most_12_options_besides_help():
    result = CliRunner().invoke(cli.main, ["run", "--help"], terminal_width=100)
    options = re.findall(r"^  (?:-h, )?(--[a-z][a-z0-9-]*)", result.output.split("Options:", 1)[1], re.M)
    assert "--help" in options and 8 <= len(options) - 1 <= 12, options
    for everyday in ("--workers", "--rate", "--burst", "--source"):
        assert everyday in options


# --- lazy loading and what Settings holds ----------------------------------------------------------------

def test_a_command_imports_only_its_own_module(tmp_path):
    code = ("import sys\nfrom scraper.cli import main\n"
            "try:\n    main(['--db', sys.argv[1], 'status'])\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith(('scraper', 'requests', 'psutil', "
            "'singer_sdk')))))")
    from scraper.db import store
    store.open_db(str(tmp_path / "jobs.db")).close()      # a database there, so that status reads all it shows
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "jobs.db")], capture_output=True, text=True,
                          cwd=tmp_path)
    loaded = set(done.stdout.split())
    assert "scraper.cli.reading" in loaded and "scraper.products.status" in loaded, done.stderr
    assert not loaded & {"scraper.cli.run", "scraper.cli.seed", "scraper.cli.update", "scraper.cli.products",
                         "scraper.cli.mirror", "scraper.cli.serving", "scraper.cli.tap", "requests", "psutil",
                         "singer_sdk"}     # singer-sdk costs 0.3 s to import: only `scraper tap` pays for it


def test_settings_hold_settings_only():
    fields = {f.name for f in __import__("dataclasses").fields(settings.Settings)}
    assert "browser_slots" not in dir(settings.Settings)    # the capacity model is net.chromium's
    assert {spec.field for spec in settings.SPECS.values()} <= fields
    for spec in settings.SPECS.values():
        assert spec.help.endswith((".", ")")) and spec.kind in config.KINDS and re.fullmatch(r"[a-z_]+", spec.key)


# --- a run takes its budget from scraper.toml, and the site sees it kept --------------------------------

@pytest.mark.slow
def test_a_run_takes_rate_burst_and_workers_from_scraper_toml_and_the_site_sees_them_kept(standin, tmp_path,
                                                                                         monkeypatch):
    # The site allows 4 requests/s with a burst of 2: stricter than the defaults (2/s, burst 5, whose first
    # burst it would answer with 429s); the file gives the run the site's own budget and 3 workers.
    site = standin(templates=20, rate=4, burst=2)
    db = tmp_path / "jobs.db"
    (tmp_path / "scraper.toml").write_text("[scraper]\nrate = 4\nburst = 2\nworkers = 3\n")
    monkeypatch.chdir(tmp_path)
    shown = config_json()["settings"]
    assert {k: shown[k] for k in ("rate", "burst", "workers")} == {
        "rate": {"value": 4.0, "origin": "file"}, "burst": {"value": 2, "origin": "file"},
        "workers": {"value": 3, "origin": "file"}}
    in_process(site, db, "seed", "--from-search", check=0)
    env = {k: v for k, v in scraper_env(site, db).items() if k not in ("SCRAPER_RATE", "SCRAPER_BURST",
                                                                      "SCRAPER_WORKERS")}
    done = warm.run([sys.executable, "-m", "scraper", "run"], env=env, cwd=tmp_path, capture_output=True,
                    text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert site.stats()["http_429"] == 0
    import sqlite3
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT workers FROM runs ORDER BY started_at DESC LIMIT 1").fetchone() == (3,)
        assert conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()[0] >= 20


def test_the_click_declarations_come_from_the_settings():
    ctx = click.Context(cli.main)
    run = cli.main.get_command(ctx, "run")
    for p in run.params:
        if p.name in settings.SPECS:
            assert p.help.startswith(settings.SPECS[p.name].help) and settings.SPECS[p.name].env in p.help
