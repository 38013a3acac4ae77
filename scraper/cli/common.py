"""What every command shares: the one-sentence failure, the group that stamps errors, settings and the
database of a command."""

import contextlib
import io
import logging
import os
import sqlite3

import click

from scraper.base import exitcodes, logs, settings
from scraper.base.errors import ConfigError

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
    """The command group; its only addition is the timestamp on click's own `Error:` lines."""

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


def _say(text):
    """A command's result line, timestamped like the log lines around it in a cron log."""
    click.echo(logs.stamped(text))


def _settings(ctx, **values):
    """Validated settings from the global options plus this command's."""
    from scraper.db import store
    try:
        s = settings.build(**ctx.obj, **values)
        if os.path.isfile(s.db_path) and os.path.getsize(s.db_path):
            store.check_readable(s.db_path)  # a damaged file is refused before anything runs
        return s
    except ConfigError as e:
        raise Failure(str(e)) from None


@contextlib.contextmanager
def _existing_db(s):
    """`with _existing_db(s) as conn:` the database of a command that needs one already (status never
    creates one), closed at the end; a ConfigError from the library becomes the command's one sentence."""
    from scraper.db import store
    if not os.path.exists(s.db_path):
        raise Failure(f"there is no database at {s.db_path}; run `scraper seed` first.")
    try:
        conn = store.open_db(s.db_path)
    except sqlite3.DatabaseError as e:
        raise Failure(f"{s.db_path} cannot be used as a database ({e}).") from None
    try:
        yield conn
    except ConfigError as e:
        raise Failure(str(e)) from None
    finally:
        conn.close()



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
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'notifications'").fetchone():
            store.record_notification(conn, at, kind, ok)
    finally:
        conn.close()
