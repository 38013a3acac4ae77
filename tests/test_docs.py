"""The operator's documentation runs: every command in docs/operations.md, for real, against a database
filled by a real run against the stand-in site; every option and status key the docs name exists."""

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import click
import pytest
from click.testing import CliRunner

from scraper.base import config, settings
from scraper.cli import main as cli
from scripts.standin import client
from tests.helpers import ROOT, in_process, rows, scraper, scraper_env, status_json

pytestmark = pytest.mark.slow

OPERATIONS = ROOT / "docs" / "operations.md"
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
SQLITE_UTILS = str(Path(sys.executable).parent / "sqlite-utils")
SCRAPER = f"{shlex.quote(sys.executable)} -m scraper"

COMMANDS = ("config", "seed", "update", "run", "status", "retry", "failures", "export", "refresh", "changes", "history",
            "reextract", "search", "stats", "report", "migrate", "mcp", "serve", "discover", "sources", "tap")
SCRAPER_RE = re.compile(r"^(?:\.venv/bin/)?scraper(?=\s|$)")
SQLITE_UTILS_RE = re.compile(r"^(?:\.venv/bin/)?sqlite-utils(?=\s|$)")
CRON_RE = re.compile(r"^(?:@\w+|(?:[\d*/,-]+\s+){5})(?P<commands>.*)$")
CD_RE = re.compile(r"^cd\s+\S+\s*&&\s*")
COMMENT_RE = re.compile(r"\s+#\s+")
EXIT_RE = re.compile(r"\bexit (\d+)")
# `jobs.db`, `/srv/scraper/jobs.db`, `jobs.db-limiter` ...: the test's database and its siblings
DB_RE = re.compile(r"(?<![\w.~/-])(?:[\w.~-]*/)*jobs\.db(?P<suffix>-[\w.-]+)?(?![\w.-])")
APPEND_RE = re.compile(r">>\s*(\S+)")
WRITE_RE = re.compile(r"(?:--output|-o)\s+(\S+)|(?<!>)>\s*(\S+)")
# programs the guide shows but this test does not run
NOT_RUN = ("make", "mkdir", "kill", "crontab")


# --- reading the docs -----------------------------------------------------------------------------


def sh_lines(path):
    """The lines of the ```sh blocks, continuation lines joined, comment-only lines dropped."""
    lines = []
    for block in re.findall(r"^```sh\n(.*?)^```", path.read_text(), re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def split_comment(command):
    """(command, expected exit code): the guide states a code as `# exit N ...`; otherwise it is 0."""
    command, *comment = COMMENT_RE.split(command, maxsplit=1)
    expected = EXIT_RE.search(comment[0]) if comment else None
    return command.strip(), int(expected.group(1)) if expected else 0


def commands_of(line):
    """The commands of one line: a crontab line gives each command after its schedule and `cd`."""
    cron = CRON_RE.match(line)
    if cron is None:
        return [line]
    return [c.strip() for c in re.split(r";|&&", CD_RE.sub("", cron.group("commands"))) if c.strip()]


def runnable():
    """[(doc line, [(command, expected exit code), ...])]: the lines this test runs; the commands of a
    crontab line run one after the other in one folder."""
    found = []
    for line in sh_lines(OPERATIONS):
        commands = [split_comment(c) for c in commands_of(line)]
        if all(SCRAPER_RE.match(c) or SQLITE_UTILS_RE.match(c) for c, _ in commands):
            found.append((line, commands))
        else:
            assert line.split()[0] in NOT_RUN, f"the guide shows a command this test does not know: {line}"
    return found


def code_spans(path):
    """The `inline code` of a document (fenced blocks left out)."""
    prose = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", prose)


# --- running them ---------------------------------------------------------------------------------


def shell(command, db):
    """The guide's command as this test runs it: this Python's scraper and sqlite-utils, the test's db."""
    command = SCRAPER_RE.sub(SCRAPER, command)
    command = SQLITE_UTILS_RE.sub(shlex.quote(SQLITE_UTILS), command)
    return DB_RE.sub(lambda m: shlex.quote(str(db) + (m.group("suffix") or "")), command)


def copy_of(filled_db, folder, site):
    """A fresh copy of the filled database and its sibling files, with what the guide takes as given
    (a logs folder, a file of template ids)."""
    folder.mkdir()
    for f in filled_db.parent.glob(filled_db.name + "*"):
        shutil.copy2(f, folder / f.name)
    (folder / "logs").mkdir()
    (folder / "my-templates.txt").write_text("".join(f"{i}\n" for i in site.corpus()["ids"][:3]))
    return folder / filled_db.name


def run_doc_command(command, expected, db, site, env=None):
    """Run it in the database's folder (`env`: extra variables); for `# exit 75` another run must hold the
    database: hold its lock."""
    lock = None
    if expected == 75:
        lock = os.open(f"{db}-run.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        done = subprocess.run(["bash", "-c", shell(command, db)], cwd=db.parent,
                              env={**scraper_env(site, db), **(env or {})},
                              capture_output=True, text=True, timeout=120)
    finally:
        if lock is not None:
            os.close(lock)
    appended = APPEND_RE.search(command)
    if appended:        # the output went to a log: check the log instead
        log = (db.parent / appended.group(1)).read_text()
        done = SimpleNamespace(returncode=done.returncode, stdout=log, stderr=log)
    return done


def has(text):
    return lambda done, ctx: text in done.stdout + done.stderr


# what a command's output must show, where that is cheap to tell: (pattern on the guide's command, check)
OUTPUT_CHECKS = [
    (r"scraper status --json", lambda done, ctx: json.loads(done.stdout)["total"] == ctx["total"]),
    (r"scraper status$", has("total:")),
    (r"scraper failures$", lambda done, ctx: done.stdout.count("  invalid  http_4xx") == ctx["invalid"]),
    (r"scraper failures --json", lambda done, ctx: len(json.loads(done.stdout)) == ctx["invalid"]
     and all(r["last_error"] for r in json.loads(done.stdout))),
    (r"--db missing\.db status", has("there is no database at missing.db")),
    (r"\bseed --from-search\b", has("already known")),
    (r"\bseed --ids\b", has("3 already known")),
    (r"\bretry --failed\b", has("failed job(s) back to pending")),
    (r"\bretry --invalid\b", lambda done, ctx: f"moved {ctx['invalid']} invalid" in done.stdout),
    (r"\bretry --all\b", lambda done, ctx: f"moved {ctx['invalid']} failed/invalid" in done.stdout),
    (r"scraper update\b", has("update finished: exit 0, every step succeeded")),
    (r"scraper run\b", lambda done, ctx: ("another `scraper run`" if ctx["expected"] == 75 else "run finished")
     in done.stderr),
    (r"tables jobs\.db --counts", has('"table": "workflows"')),
    (r"tables jobs\.db-limiter --counts", has('"table": "slots"')),
    (r"group by status", has('"status": "done"')),
    (r"rows jobs\.db workflows", has('"quality_score"')),
    (r"status in \('failed', 'invalid'\)", has("HTTP 404")),
    (r"from runs order by", has("exit_code")),
    (r"rows jobs\.db domains", has('"domain": "127.0.0.1"')),
    (r"export --format jsonl", lambda done, ctx: len(ctx["file"].read_text().splitlines()) == ctx["done"]),
    (r"export --format json\b", lambda done, ctx: len(json.loads(ctx["file"].read_text())) == ctx["done"]),
    (r"export --format csv", lambda done, ctx: ctx["file"].read_text().startswith("id,name,")),
    (r"scraper refresh --older-than 30", has("queued 0 template(s)")),
    (r"scraper changes --json", lambda done, ctx: len(json.loads(done.stdout)) == ctx["done"]),
    (r"scraper history \d+$", has("version 1 ")),
    (r"scraper history \d+ --json", lambda done, ctx: json.loads(done.stdout)[0]["version"] == 1),
    (r"scraper reextract", lambda done, ctx: f"rebuilt {ctx['done']} workflow row(s)" in done.stdout),
    (r"export --format parquet", lambda done, ctx: ctx["file"].read_bytes()[:4] == b"PAR1"),
    (r"export .*--no-redact", has("not redacted")),
    (r"export (?!.*--no-redact)", has("redacted")),
    (r"scraper search .*--json", lambda done, ctx: isinstance(json.loads(done.stdout), list)),
    (r"scraper stats --json", lambda done, ctx: json.loads(done.stdout)["templates"] == ctx["done"]),
    (r"scraper stats$", has("node types")),
    (r"scraper report", lambda done, ctx: ctx["file"].read_text().startswith("<!DOCTYPE html>")
     and 'id="chart-nodes"' in ctx["file"].read_text()),
]


CRON_STEPS = [["update", "--workers"]]


def cron_lines(path):
    return [line for line in sh_lines(path) if CRON_RE.match(line)]


def test_the_crontab_line_is_the_same_in_the_readme_and_the_guide_and_make_scrape_takes_its_steps():
    (readme_line,) = cron_lines(README)
    guide = cron_lines(OPERATIONS)
    assert guide == [readme_line]
    steps = [c.split()[1:3] for c in commands_of(readme_line)]
    assert steps == CRON_STEPS
    recipe = MAKEFILE.read_text().split("\nscrape:", 1)[1].split("\n\n", 1)[0]
    made = [line.split()[1:3] for line in recipe.splitlines() if "/scraper " in line]
    assert made == CRON_STEPS


def test_the_crontab_line_works_from_an_empty_folder_and_logs_with_timestamps(standin, tmp_path):
    site = standin(templates=25, rate=50, burst=5, faults="403:0.1,503:0.2", seed=4)
    folder = tmp_path / "fresh"
    folder.mkdir()
    db = folder / "jobs.db"
    (line,) = cron_lines(README)
    commands = [shell(c, db) for c in commands_of(line)]
    for _night in (1, 2):
        for command in commands:
            subprocess.run(["bash", "-c", command], cwd=folder, env=scraper_env(site, db), timeout=120, check=False)
    counts = {r["status"]: r["n"] for r in rows(db, "SELECT status, COUNT(*) AS n FROM jobs GROUP BY status")}
    assert sum(counts.values()) == 25 and counts.get("failed") and not counts.get("pending"), counts
    log = (folder / "scraper.log").read_text().splitlines()
    stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
    assert [line for line in log if not stamp.match(line)] == []
    assert sum("n8n: walked (complete" in line and ": 25 new," in line for line in log) == 1   # the first time
    assert sum("n8n: not due until" in line and "nothing sent." in line for line in log) == 1  # then its cadence
    assert sum("failed job(s) back to pending;" in line for line in log) == 2
    ends = [line for line in log if " next: " in line]
    assert len(ends) == 2 and all("scraper failures" in line for line in ends)   # the 403s stay failed
    # the 403s failed within --retry-after (24 h): the second night leaves them alone
    assert "moved 0 failed job(s) back to pending" in [line for line in log if "back to pending" in line][-1]
    finals = [line for line in log if "update finished:" in line]
    assert len(finals) == 2 and all("exit 1, set by the run" in line for line in finals), finals
    assert log[-1] == finals[-1]


def fill(site, db):
    scraper(site, db, "seed", "--from-search", check=0)
    scraper(site, db, "run", "--workers", "2", "--rate", "50", "--burst", "5", "--backoff-base", "0.1", check=0)


GUIDE_LINES = runnable()


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """(site, db, counts, env): a stand-in and a database filled by a real run of it, once per test process;
    each line of the guide runs on a copy of it, with YouTube's stand-in for the lines that turn
    transcripts on (`env`)."""
    # one template of the 40 shows a video: a transcript takes a few requests at YouTube's 0.2/s
    with client.start(templates=40, rate=50, burst=5, faults="404:0.1,503:0.1", seed=7, video_every=40) as site, \
            client.start(youtube=True, rate=50, burst=10) as youtube:
        db = tmp_path_factory.mktemp("filled") / "jobs.db"
        fill(site, db)
        counts = {r["status"]: r["n"] for r in rows(db, "SELECT status, COUNT(*) AS n FROM jobs GROUP BY status")}
        assert counts.get("invalid") and counts.get("done") and not counts.get("failed"), counts
        yield site, db, counts, {"SCRAPER_YOUTUBE_URL": youtube.url}


def test_the_guide_holds_enough_commands_and_a_crontab_line():
    assert len(GUIDE_LINES) >= 20
    assert any(CRON_RE.match(line) and [c.split()[1:3] for c, _ in commands] == CRON_STEPS
               for line, commands in GUIDE_LINES), "no crontab line seeds, retries, then runs"


# one test per line of the guide, so the lines run side by side
@pytest.mark.parametrize("number", range(len(GUIDE_LINES)))
def test_every_command_in_the_operations_guide_runs(filled, tmp_path, number):
    site, db, counts, env = filled
    line, commands = GUIDE_LINES[number]
    problems = []
    copy = copy_of(db, tmp_path / f"line{number}", site)
    for command, expected in commands:
        done = run_doc_command(command, expected, copy, site, env)
        if done.returncode != expected:
            problems.append(f"{line}\n  `{command}` exited {done.returncode}, the guide says {expected}:\n"
                            f"{done.stdout[-600:]}{done.stderr[-1200:]}")
            continue
        written = WRITE_RE.search(command)
        ctx = {"expected": expected, "total": sum(counts.values()), "done": counts["done"],
               "invalid": counts["invalid"],
               "file": written and copy.parent / (written.group(1) or written.group(2))}
        for pattern, check in OUTPUT_CHECKS:
            if re.search(pattern, command) and not check(done, ctx):
                problems.append(f"{line}\n  `{command}`: the output fails the check {pattern!r}:\n"
                                f"{done.stdout[-600:]}{done.stderr[-600:]}")
    assert not problems, "\n\n".join(problems)


# --- options and keys -----------------------------------------------------------------------------


def help_of(*command):
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    return result.output


def options_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def scraper_invocations():
    """[(the words after `scraper`, where they were found)] from both documents: the sh blocks, and
    inline code that starts with `scraper` or with a command name followed by an option."""
    found = []
    for path in (OPERATIONS, ARCHITECTURE):
        for line in sh_lines(path):
            for command in commands_of(line):
                command = split_comment(command)[0]
                if SCRAPER_RE.match(command):
                    found.append((shlex.split(command)[1:], f"{path.name}: {line}"))
        for span in code_spans(path):
            words = span.split()
            if SCRAPER_RE.match(span):
                found.append((shlex.split(span)[1:], f"{path.name}: `{span}`"))
            elif words[0] in COMMANDS and len(words) > 1 and words[1].startswith("--"):
                found.append((shlex.split(span), f"{path.name}: `{span}`"))
    return found


def test_every_option_the_docs_name_exists():
    # the hidden options too: the old flags still work, so a guide may still name them
    helps = {name: set(options_of(command)) | {"--help"} for name, command in commands().items()}
    global_options = set(options_of(cli))
    invocations = scraper_invocations()
    assert len(invocations) >= 20
    problems = []
    for words, where in invocations:
        command = None
        for word in words:
            if word.startswith("--"):
                # global options are accepted after the command name too
                if word.split("=")[0] not in (helps[command] | global_options if command else global_options):
                    problems.append(f"{where}: {word} is not an option of `scraper {command or ''}`")
            elif command is None and word in COMMANDS:
                command = word
    # an option named alone in the text belongs to some scraper command or to the sqlite-utils
    # commands the guide uses
    every = global_options.union(*helps.values())
    for sub in ("tables", "query", "rows"):
        every |= options_in(subprocess.run([SQLITE_UTILS, sub, "--help"], capture_output=True, text=True).stdout)
    for path in (OPERATIONS, ARCHITECTURE):
        for span in code_spans(path):
            problems += [f"{path.name}: `{span}` names {o}, which no command has" for o in options_in(span) - every]
    assert not problems, "\n".join(problems)


TABLE_LEAD = re.compile(r"^(?:Global options|`scraper (?P<command>[a-z]+)`)")
TABLE_ROW = re.compile(r"^\| `(?P<options>--[a-z][a-z0-9/-]*)` \| (?P<default>[^|]+?) \|")


def option_tables():
    """{command ('' for the global options): {option: stated default}} from the guide's option tables;
    a table led by "takes every option of `scraper run`" has run's rows too."""
    section = OPERATIONS.read_text().split("## Options and defaults", 1)[1]
    tables, current = {}, None
    for line in section.splitlines():
        lead = TABLE_LEAD.match(line)
        if lead:
            current = lead.group("command") or ""
            rows = tables.setdefault(current, {})
            if "every option of `scraper run`" in line:
                rows["inherits"] = "run"
            continue
        row = TABLE_ROW.match(line)
        if row and current is not None:
            for option in row.group("options").split("/"):
                tables[current][option] = row.group("default").strip("` ")
    for rows in tables.values():
        if rows.pop("inherits", None):
            rows.update(tables["run"])
    return tables


def options_of(command):
    """Every option of a command (hidden ones too) but --help and --version, with the click parameter."""
    return {opt: p for p in command.params if isinstance(p, click.Option) and p.name != "version"
            for opt in (*p.opts, *p.secondary_opts)}


def commands():
    """{name: command}, each loaded (the group loads a command's module only when it runs)."""
    ctx = click.Context(cli)
    return {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}


def test_the_guides_settings_table_is_the_one_generated_from_the_declarations():
    text = OPERATIONS.read_text()
    table = text.split("<!-- settings table: generated from the declarations -->\n", 1)[1]
    assert table.split("<!-- end of the settings table -->")[0].strip() == config.markdown_table(settings.SPECS), \
        "regenerate the table in docs/operations.md from scraper.base.config.markdown_table(settings.SPECS)"


def test_every_option_of_every_command_is_in_the_guides_tables():
    tables, table = option_tables(), OPERATIONS.read_text()
    missing = [f"{name or 'global'}: {opt}" for name, command in [("", cli), *sorted(commands().items())]
               for opt, p in options_of(command).items()
               if p.name not in settings.SPECS and opt not in tables.get(name, {})]
    # a setting's flags are in the settings table, on its key's row
    missing += [f"setting {key}: {spec.long_flag}" for key, spec in settings.SPECS.items()
                if f"| `{key}` | `{spec.long_flag}" not in table]
    assert not missing, "options missing from the guide's tables:\n" + "\n".join(missing)


def test_the_option_tables_give_the_real_defaults():
    tables, loaded = option_tables(), commands()
    assert len(tables) >= 14
    for name, stated_defaults in tables.items():
        command = loaded[name] if name else cli
        params, ctx = options_of(command), click.Context(command)
        for option, stated in stated_defaults.items():
            assert option in params, f"{name}: the guide names {option}, which it does not have"
            param = params[option]
            assert param.name not in settings.SPECS, f"{name}: {option} is a setting: the settings table has it"
            real = param.get_default(ctx)
            where = f"scraper {name} {option}"
            if param.is_flag and not param.secondary_opts:
                assert stated == ("on" if real else "off"), where
            elif isinstance(real, bool):
                assert stated == ("on" if real else "off"), where
            elif real is None or real == () or "UNSET" in repr(real):
                assert stated == "none", where
            elif isinstance(real, (int, float)):
                assert float(stated) == float(real), where
            else:
                assert stated == str(real), where


def test_the_guide_shows_how_to_point_the_tool_at_the_standins_by_hand():
    text = OPERATIONS.read_text()
    recipe = text.split("### Trying it by hand against the stand-ins", 1)[1].split("\n## ", 1)[0]
    for needed in ("/api", "SCRAPER_API_URL", "SCRAPER_SITE_URL", "SCRAPER_YOUTUBE_URL", "python -m scripts.standin ",
                   "python -m scripts.standin.youtube"):
        assert needed in recipe, needed
    for module in ("scripts.standin", "scripts.standin.youtube"):
        real = options_in(subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True,
                                          text=True).stdout)
        used = {o for line in recipe.splitlines() if f"-m {module} " in line for o in options_in(line)}
        assert used and used <= real, (module, used - real)


def test_the_cron_log_is_ignored_by_git_and_the_guide_shows_how_to_rotate_it():
    (line,) = cron_lines(README)
    log = APPEND_RE.search(line).group(1)
    ignored = subprocess.run(["git", "check-ignore", "-q", log], cwd=ROOT).returncode == 0
    assert ignored or log.startswith("/"), f"{log} would be committed"
    assert "logrotate" in OPERATIONS.read_text() and f"{log} {{" in OPERATIONS.read_text().replace("/srv/scraper/", "")


def test_the_readme_has_no_garbled_sentence_about_make_bench():
    text = " ".join(README.read_text().split())
    sentence = next(s for s in re.split(r"(?<=\.) ", text) if "make bench" in s)
    assert "`.venv/bin/python -m scripts.bench_data` that of" not in sentence
    assert sentence.count("(") == sentence.count(")"), sentence


def documented_status_keys():
    text = OPERATIONS.read_text()
    table = text[text.index("| `--json` key |"):]
    return re.findall(r"^\| `([^`]+)` \|", table[: table.index("\n\n")], re.M)


def test_every_documented_status_key_is_in_the_real_output(standin, tmp_path):
    site = standin(templates=20, rate=50, burst=5, faults="503:0.2", seed=3)
    db = tmp_path / "jobs.db"
    fill(site, db)
    report = status_json(site, db)
    assert report["domains"], "the run left no domain row to check the domain keys against"
    keys = documented_status_keys()
    for key in keys:
        value = report
        for part in key.split("."):
            assert isinstance(value, dict) and (part == "<domain>" or part in value), key
            value = next(iter(value.values())) if part == "<domain>" else value[part]
    top = {key.split(".")[0] for key in keys}
    assert top == set(report), f"undocumented: {set(report) - top}; not real: {top - set(report)}"
    per_domain = {key.split(".")[2] for key in keys if key.startswith("domains.<domain>.")}
    assert per_domain == set(next(iter(report["domains"].values())))


def test_every_module_the_architecture_walk_names_exists():
    text = (ROOT / "docs" / "architecture.md").read_text()
    walk = text[text.index("## One walk through the code"):text.index("## The flow of one job")]
    named = set(re.findall(r"`(scraper/[a-z0-9_/]+\.py)`", walk))
    assert len(named) >= 15, named         # the walk names a module at every step
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"docs/architecture.md's walk names modules that do not exist: {missing}"


def test_the_module_table_names_every_module_and_only_real_ones():
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("## Modules"):text.index("## One walk through the code")]
    named = set(re.findall(r"^\| `([a-z0-9_/]+)`", table, flags=re.M))
    real = {str(p.relative_to(ROOT / "scraper").with_suffix("")).removesuffix("/__init__")
            for p in (ROOT / "scraper").rglob("*.py") if p.name not in ("__main__.py",)}
    real -= {"__init__", "base", "policy", "db", "net", "politeness", "mirror", "pool", "products"}
    assert named - real == set(), "the module table names modules that do not exist"
    cli_modules = {f"cli/{name}" for name in ("common", "seed", "run", "retry", "configuration", "reading", "mirror",
                                              "products", "update", "serving", "discover")}
    assert real - named - cli_modules == set(), "a module is missing from docs/architecture.md's module table"


# --- the README fits a screen (issue 32) -----------------------------------------------------------

def first_line_with(lines, text):
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_the_readme_fits_a_screen_with_the_demo_and_a_new_site_near_the_top():
    lines = README.read_text().splitlines()
    assert len(lines) <= 120
    assert first_line_with(lines, "make demo") <= 30
    assert first_line_with(lines, "scraper discover") <= 60
    assert first_line_with(lines, "--sources sources.toml seed") <= 60
    for doc in re.findall(r"\]\((docs/[a-z_]+\.md)(?:#[a-z0-9-]+)?\)", README.read_text()):
        assert (ROOT / doc).is_file(), doc
    # every anchor the README links to exists in its document (GitHub's heading slugs)
    for doc, anchor in re.findall(r"\]\((docs/[a-z_]+\.md)#([a-z0-9-]+)\)", README.read_text()):
        slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                 for h in re.findall(r"^#+ (.+)$", (ROOT / doc).read_text(), re.M)}
        assert anchor in slugs, (doc, anchor)


def test_the_readmes_new_site_lines_run_as_written_against_the_events_standin(tmp_path):
    """The README's `discover`, `seed`, `run` and `search` lines, with the stand-in's address for the
    example's: discover prints a table, and that table mirrors the calendar's static events."""
    block = re.search(r"## A new site.*?```sh\n(.*?)```", README.read_text(), re.S).group(1)
    commands = [split_comment(line.strip())[0] for line in block.splitlines() if line.strip()]
    assert [c.split()[1] for c in commands] == ["discover", "--sources", "--sources", "--sources"]
    with client.start(catalogue=True, events=20, seed=5) as site:
        env = {**os.environ, "SCRAPER_DB": str(tmp_path / "jobs.db"), "SCRAPER_TRANSCRIPTS": "0"}
        for command in commands:
            # the example's site is the stand-in; --no-browser keeps Chromium to the timing tests
            command = command.replace("https://events.example.org/", site.url + "/")
            command = command.replace("scraper discover", f"{SCRAPER} discover --rate 50 --no-browser")
            command = command.replace("scraper --sources", f"{SCRAPER} --sources")
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == 0, (command, done.stderr[-2000:])
        static = [e for e in site.truth()["events"] if not e["script_rendered"]]
    assert (tmp_path / "sources.toml").read_text().startswith("# scraper discover")
    assert rows(tmp_path / "jobs.db", "SELECT COUNT(*) AS n FROM items")[0]["n"] == len(static)


# --- the events stand-in, and a sources file in the folder (issue 46) --------------------------------

SOURCES_GUIDE = ROOT / "docs" / "sources.md"


def test_the_events_standin_starts_as_the_sources_guide_says_and_a_discovered_file_in_the_folder_warns(
        tmp_path, monkeypatch):
    """What a new user met: the guide measured `discover` on "the project's events stand-in" without saying
    how to start it; and the README's `discover ... > sources.toml` then left the database's n8n templates
    out of every command without a word. The guide's lines run as written (a free port for its fixed one,
    discover faster and without Chromium), then the README's."""
    block = next(b for b in re.findall(r"^```sh\n(.*?)^```", SOURCES_GUIDE.read_text(), re.S | re.M)
                 if "scripts.standin.catalogue" in b)
    start, discover, seed = [shlex.split(line) for line in block.splitlines() if line.strip()]
    assert start[:3] == [".venv/bin/python", "-m", client.MODULES["catalogue"]]
    port = start[start.index("--port") + 1]
    args = [("0" if a == port else a) for a in start[3:]]
    monkeypatch.chdir(tmp_path)
    nowhere = SimpleNamespace(url="http://127.0.0.1:9", api_url="http://127.0.0.1:9/api")
    db = tmp_path / "jobs.db"
    (tmp_path / "ids.txt").write_text("1\n2\n")
    in_process(nowhere, db, "seed", "--ids", "ids.txt", check=0)      # the n8n templates the database holds
    with client.start(*args, catalogue=True) as site:
        assert discover[:2] == [".venv/bin/scraper", "discover"] and discover[-2] == ">"
        url = next(a for a in discover if a.startswith("http://"))
        assert url == f"http://127.0.0.2:{port}/"
        argv = [site.url + "/" if a == url else a for a in discover[1:-2]] + ["--rate", "50", "--no-browser"]
        found = in_process(nowhere, db, *argv, check=0)
        (tmp_path / discover[-1]).write_text(found.stdout)
        fast = ["--set", f"domain_rate={urlsplit(site.url).hostname}=50/10"]     # over the table's rate = 1.0
        walked = in_process(nowhere, db, *fast, *seed[1:], check=0)
        assert "events: walked (complete" in walked.stdout
        # the README's line writes the same table into the folder, where every command reads it
        readme = re.search(r"^scraper discover .*$", README.read_text(), re.M).group(0)
        assert readme.split(" # ")[0].rstrip().endswith("> sources.toml")
        (tmp_path / "sources.toml").write_text(found.stdout)
        bare = in_process(nowhere, db, "seed", check=0)      # as cron's `update` would: events is not due
    assert "events: not due" in bare.stdout
    assert "events.toml does not name the source 'n8n', which holds 2 job(s)" in walked.stderr
    assert "./sources.toml (read because it is in this folder) does not name the source 'n8n', which holds 2 " \
           "job(s)" in bare.stderr
