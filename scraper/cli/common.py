"""What every command shares: the one-sentence failure, the group that stamps errors, settings and the
database of a command."""

import contextlib
import io
import logging
import os
import signal
import sqlite3

import click

from scraper.base import exitcodes, logs, settings, sources
from scraper.base.errors import ConfigError, Stopped
from scraper.db import schema

log = logging.getLogger("scraper")

WATCH_EVERY_S = 1.0
CLEAR_SCREEN = "\x1b[H\x1b[2J"


class Failure(click.ClickException):
    """One sentence for the user, and its exit code (`exitcodes`; 2 unless said otherwise)."""

    def __init__(self, message, exit_code=exitcodes.USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def _stamp_show(e):
    """Make click print this error (and its usage hint) with a timestamp on every line, like a log line."""
    plain = e.show

    def show(file=None):
        buf = io.StringIO()
        plain(buf)
        click.echo(logs.stamped(buf.getvalue().rstrip("\n")), file=file, err=file is None)

    e.show = show


class Group(click.Group):
    """The command group: the timestamp on click's own `Error:` lines, and the global options accepted
    after the command name too (`scraper status --db PATH`)."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, self._globals_first(args))

    def _globals_first(self, args):
        """`args` with every global option that comes after the command name moved before it; the same
        option given twice with different values is refused."""
        takes_value = {opt for p in self.params if isinstance(p, click.Option) and not p.is_flag for opt in p.opts}
        found, head, rest, command = [], [], [], None
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":                     # everything after it is the command's own
                (rest if command else head).extend(args[i:])
                break
            name = arg.split("=", 1)[0]
            if name in takes_value:
                value = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else None)
                if value is None:
                    (rest if command else head).append(arg)     # click says the value is missing
                    break
                found.append((name, value))
                head.extend([name, value])
                i += 1 if "=" in arg else 2
                continue
            if command is None and not arg.startswith("-"):
                command = arg
                rest.append(arg)
            else:
                (rest if command else head).append(arg)
            i += 1
        seen = {}
        for name, value in found:
            if seen.setdefault(name, value) != value:
                raise click.UsageError(f"{name} is given twice with different values ({seen[name]!r} and "
                                       f"{value!r}); give it once.")
        return head + rest

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except click.ClickException as e:
            _stamp_show(e)
            raise

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.ClickException as e:
            _stamp_show(e)
            raise


class Choice(click.Choice):
    """click's Choice whose "missing" message fits on one line (click's own lists one choice a line)."""

    def get_missing_message(self, param, ctx=None):
        return f"choose one of {', '.join(map(str, self.choices))}"


def _say(text):
    """A command's result line, timestamped like the log lines around it in a cron log."""
    click.echo(logs.stamped(text))


def _db_exists(s):
    """The database is there: a SQLite file, or a PostgreSQL database that has the schema (a URL that
    cannot be reached is one sentence, exit 2)."""
    from scraper.db import runstate
    try:
        return runstate.exists(s.db_path)
    except ConfigError as e:
        raise Failure(str(e)) from None


def _settings(ctx, **values):
    """Validated settings from the global options plus this command's."""
    from scraper.db import runstate
    try:
        loaded = sources.load(ctx.obj["sources_path"])    # validated once, before anything runs
        s = settings.build(**ctx.obj, sources=loaded, **values)
        if os.path.isfile(s.db_path) and os.path.getsize(s.db_path):
            runstate.check_readable(s.db_path)  # a damaged file is refused before anything runs
        return s
    except ConfigError as e:
        raise Failure(str(e)) from None


@contextlib.contextmanager
def _existing_db(s):
    """`with _existing_db(s) as conn:` the database of a command that needs one already (status never
    creates one), closed at the end; a ConfigError from the library becomes the command's one sentence."""
    from scraper.db import store
    if not _db_exists(s):
        raise Failure(f"there is no database at {s.db_shown}; run `scraper seed` first.")
    try:
        conn = store.open_db(s.db_path)
    except ConfigError as e:
        raise Failure(str(e)) from None
    except sqlite3.DatabaseError as e:
        raise Failure(f"{s.db_shown} cannot be used as a database ({e}).") from None
    try:
        yield conn
    except ConfigError as e:
        raise Failure(str(e)) from None
    finally:
        conn.close()



SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
SIGNAL_CODES = {signal.SIGINT: exitcodes.SIGINT, signal.SIGTERM: exitcodes.SIGTERM}


@contextlib.contextmanager
def raising_on_signals():
    """Inside: SIGINT and SIGTERM raise `Stopped` (so every `finally` runs), instead of click's bare
    `Aborted!` (exit 1) or a silent death (SIGTERM leaves temporary files behind)."""
    def stop(signum, frame):
        raise Stopped(signum, SIGNAL_CODES[signum])

    previous = {sig: signal.signal(sig, stop) for sig in SIGNAL_CODES}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def stops_cleanly(what, partial=None):
    """`with stops_cleanly("export"):` around a command that writes a file through a temporary one (export,
    report, any coming export): a signal removes the temporary file (the writer's own `finally`), prints
    one timestamped line saying nothing was written, and exits 130 (Ctrl-C) or 143 (SIGTERM). `partial`:
    the sentence to say instead, when output already went somewhere it cannot be taken back (stdout)."""
    try:
        with raising_on_signals():
            yield
    except Stopped as e:
        said = partial or "nothing was written"
        click.echo(logs.stamped(f"{what} stopped by {SIGNAL_NAMES[e.signum]}; {said}."), err=True)
        raise click.exceptions.Exit(e.code) from None


@contextlib.contextmanager
def _health(s, what):
    """`with _health(s, "run") as health:` the command's ping at its start; a Failure or crash inside is
    reported (ping /fail, notification) before it propagates. The block calls `health.finished(code, ...)`
    itself when it ends on its own. Nothing is sent where --ping-url and --notify-url are not set."""
    from scraper.net import notify
    health = notify.Health(s.ping_url, s.notify_url, record=lambda at, kind, ok: _record(s, at, kind, ok),
                           what=what, user_agent=s.user_agent)
    health.started()
    try:
        yield health
    except Failure as e:
        health.finished(e.exit_code, str(e))
        raise
    except Exception as e:
        health.finished(exitcodes.FAILED, f"{type(e).__name__}: {e}")
        raise


def _record(s, at, kind, ok):
    """Keep a ping's outcome in the database (for `status`), when there is one."""
    from scraper.db import store
    if not os.path.exists(s.db_path):
        return
    conn = store.connect(s.db_path)
    try:
        if schema.has_table(conn, "notifications"):
            store.record_notification(conn, at, kind, ok)
    finally:
        conn.close()


def robots_options(f):
    """--robots and --robots-ignore, shared by seed, run and update."""
    f = click.option("--robots-ignore", "robots_ignore", multiple=True, metavar="DOMAIN",
                     envvar=settings.ENV_ROBOTS_IGNORE,
                     help=f"Ignore this domain's robots.txt rules knowingly (a warning at start); repeatable "
                          f"[env {settings.ENV_ROBOTS_IGNORE}, comma-separated]. Transcripts need "
                          f"youtube.com: its robots.txt disallows the library's requests.")(f)
    return click.option("--robots", type=click.Choice(["obey", "ignore"]), default=settings.ROBOTS,
                        show_default=True, envvar=settings.ENV_ROBOTS,
                        help=f"Obey each host's robots.txt (rules, Crawl-delay, Request-rate), or ignore every "
                             f"host's rules with a warning [env {settings.ENV_ROBOTS}].")(f)


def _robots_values(robots, robots_ignore):
    """Settings values of the robots options (an env variable's commas split like repeated options)."""
    return {"robots": robots, "robots_ignore": settings.parse_domains(
        robots_ignore.split(",") if isinstance(robots_ignore, str) else robots_ignore)}


def _fetch_failure(e, s):
    """The sentence for a search request (or its host's robots.txt, the walk's first request) that failed:
    the URL tried, and what to do next."""
    from scraper.policy import retry
    url = e.url or s.api_url
    offline = "check the network or --api-url, or try `make demo` (it needs no internet)"
    if e.kind == retry.TIMEOUT:
        return (f"{url} did not answer within {s.timeout_s:g} s; {offline}, or raise --timeout; "
                f"nothing was seeded.")
    if e.status is not None:
        return (f"{url} answered HTTP {e.status}; check --api-url (n8n's is {settings.API_URL}); "
                f"nothing was seeded.")
    reason = str(e).split(":", 1)[0]
    return f"could not reach {url} ({reason}); {offline}; nothing was seeded."
