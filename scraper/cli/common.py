"""What every command shares: the one-sentence failure, the group that loads each command lazily and stamps
errors, the click options made from the settings' declarations, the settings and the database of a command."""

import contextlib
import importlib
import io
import logging
import os
import signal
import sys

import click

from scraper.base import config, exitcodes, logs, settings
from scraper.base.config import METAVARS, parse_set
from scraper.base.errors import ConfigError, DatabaseError, Stopped
from scraper.base.urls import is_db_url
from scraper.db import schema

log = logging.getLogger("scraper")

WATCH_EVERY_S = 1.0
CLEAR_SCREEN = "\x1b[H\x1b[2J"


class Failure(click.ClickException):
    """One sentence for the user, and its exit code (`exitcodes`; 2 unless said otherwise)."""

    def __init__(self, message, exit_code=exitcodes.USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def stamp_show(e):
    """Make click print this error (and its usage hint) with a timestamp on every line, like a log line; at
    a terminal, one plain sentence instead (timestamps belong in logs, the usage hint in --help)."""
    plain = e.show

    def show(file=None):
        stream = sys.stderr if file is None else file
        if logs.is_terminal(stream):
            click.echo(plain_sentence(e), file=stream)
            return
        buf = io.StringIO()
        plain(buf)
        click.echo(logs.stamped(buf.getvalue().rstrip("\n")), file=stream)

    e.show = show


def plain_sentence(e):
    """`Error: ...` in one line; a usage error names the --help that shows what the command takes."""
    message = e.format_message().replace(". (Did you mean", " (did you mean")    # click's suggestion, in the sentence
    if isinstance(e, click.UsageError) and e.ctx is not None:
        message = f"{message.rstrip('.')}; `{e.ctx.command_path} --help` shows what it takes."
    return f"Error: {message}"


class Group(click.Group):
    """The command group: each command's module imported only when that command runs (click's LazyGroup
    pattern; `lazy` maps a name to "module:attribute"), the timestamp on click's own `Error:` lines, and the
    global options accepted after the command name too (`scraper status --db PATH`)."""

    def __init__(self, *args, lazy=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx):
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx, name):
        if name in self.lazy:
            module, attribute = self.lazy[name].split(":")
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, name)

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, self.globals_first(args))

    def globals_first(self, args):
        """`args` with every global option that comes after the command name moved before it; the same
        option (but a repeatable one, `--set`) given twice with different values is refused."""
        options = [p for p in self.params if isinstance(p, click.Option) and not p.is_flag]
        takes_value = {opt for p in options for opt in p.opts}
        repeatable = {opt for p in options if p.multiple for opt in p.opts}
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
                if name not in repeatable:
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
            stamp_show(e)
            raise

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.ClickException as e:
            stamp_show(e)
            raise


def setting_options(*keys, hidden=(), aliases=None):
    """A decorator adding the click option of each setting in `keys` (shown in --help) and in `hidden` (still
    accepted: the old flags of crontabs), made from its declaration; no default of its own (a flag not given
    leaves the setting to the file, the environment or the default) and no conversion (the declaration
    parses, naming the flag in its sentence). `aliases`: {key: another spelling of its flag on this command}."""
    def decorate(f):
        for key in reversed((*keys, *hidden)):
            option = setting_option(key, key in hidden, (aliases or {}).get(key))
            f.__click_params__ = [*getattr(f, "__click_params__", []), option]
        return f
    return decorate


def setting_option(key, hidden=False, alias=None):
    spec = settings.SPECS[key]
    default = spec.show(spec.default)
    shown = ("on" if default else "off") if spec.kind == "bool" else \
        ",".join(map(str, default)) if isinstance(default, list) else default
    unit = f" {spec.unit}" if spec.unit else ""
    facts = ([f"default: {shown}{unit}"] if shown not in (None, "") else []) + [f"env {spec.env}"]
    text = f"{spec.help} [{'; '.join(facts)}]"
    flag = spec.long_flag
    if spec.kind == "bool":
        decls = [flag] if flag.startswith("--no-") else [f"{flag}/--no-{flag[2:]}"]
        return click.Option([*decls, key], is_flag=True, default=None, hidden=hidden, help=text)
    metavar = spec.metavar or (f"[{'|'.join(spec.choices)}]" if spec.kind == "choice" else METAVARS.get(spec.kind))
    if spec.kind == "list":
        text = text.replace(" [", " Repeatable, or comma-separated. [", 1)
    return click.Option([*([alias] if alias else []), flag, key], multiple=spec.kind == "list", metavar=metavar,
                        hidden=hidden, help=text)


def cli_items(flags):
    """(key, raw value, where) of the setting flags given (a flag not given is None or empty)."""
    return [(key, value, settings.SPECS[key].long_flag) for key, value in flags.items()
            if key in settings.SPECS and value not in (None, ())]


def root_options(config_path, sets, flags):
    """What the group's options give every command: the configuration file given, and the command line's
    settings (`--set` first, then the global flags); a malformed --set is a Failure."""
    try:
        items = [(*parse_set(text), f"--set {text}") for text in sets]
    except ConfigError as e:
        raise Failure(str(e)) from None
    return {"config": config_path, "cli": items + cli_items(flags)}


def layered_values(root, flags=None):
    """{key: value} of every setting from the layers (the file, the environment, --set and the global flags,
    then a command's setting `flags`), without building Settings; ConfigError on a mistake."""
    path = config.config_path(root["config"])
    table = config.file_table(config.read_toml(path, "configuration file"), path) if path else {}
    return config.resolve(settings.SPECS, table, path, os.environ, root["cli"] + cli_items(flags or {})).values


def setting_values(ctx, flags=None):
    """{key: value} of every setting from the layers and this command's setting `flags`, without building
    Settings (no sources file read, no database checked): for a command that needs a few of them only
    (`discover`)."""
    try:
        return layered_values(ctx.find_root().obj, flags)
    except ConfigError as e:
        raise Failure(str(e)) from None


def command_settings(ctx, flags=None, **extra):
    """Validated settings from every layer: the file, the environment, --set and the global flags, then this
    command's setting `flags`; `extra`, the command's own values. A mistake is a Failure (exit 2)."""
    from scraper.db import runstate
    root = ctx.find_root().obj
    try:
        s, _ = settings.load(root["config"], os.environ, root["cli"] + cli_items(flags or {}), **extra)
        logs.setup(s.log_level)
        if os.path.isfile(s.db_path) and os.path.getsize(s.db_path):
            runstate.check_readable(s.db_path)  # a damaged file is refused before anything runs
        return s
    except ConfigError as e:
        raise Failure(str(e)) from None


class Choice(click.Choice):
    """click's Choice whose "missing" message fits on one line (click's own lists one choice a line)."""

    def get_missing_message(self, param, ctx=None):
        return f"choose one of {', '.join(map(str, self.choices))}"


def say(text):
    """A command's result line, timestamped like the log lines around it in a cron log."""
    click.echo(logs.stamped(text))


def db_exists(s):
    """The database is there: a SQLite file, or a PostgreSQL database that has the schema (a URL that
    cannot be reached is one sentence, exit 2)."""
    from scraper.db import runstate
    try:
        return runstate.exists(s.db_path)
    except ConfigError as e:
        raise Failure(str(e)) from None


@contextlib.contextmanager
def existing_db(s):
    """`with existing_db(s) as conn:` the database of a command that needs one already (status never
    creates one), closed at the end; a ConfigError from the library becomes the command's one sentence."""
    from scraper.db import store
    if not db_exists(s):
        raise Failure(f"there is no database at {s.db_shown}; run `scraper seed` first.")
    try:
        conn = store.open_db(s.db_path)
    except ConfigError as e:
        raise Failure(str(e)) from None
    except DatabaseError as e:
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
def health(s, what):
    """`with health(s, "run") as h:` the command's ping at its start; a Failure or crash inside is
    reported (ping /fail, notification) before it propagates. The block calls `health.finished(code, ...)`
    itself when it ends on its own. Nothing is sent where ping_url and notify_url are not set. A failure the
    outbox holds that a crash kept untold is told first (mirror/announce)."""
    from scraper.mirror import announce
    from scraper.net import notify
    pings = notify.Health(s.ping_url, s.notify_url, record=lambda at, kind, ok: _record(s, at, kind, ok),
                          what=what, user_agent=s.user_agent, outbox=announce.Outbox(s.db_path))
    pings.started()
    try:
        yield pings
    except Failure as e:
        pings.finished(e.exit_code, str(e))
        raise
    except Exception as e:
        pings.finished(exitcodes.FAILED, f"{type(e).__name__}: {e}")
        raise


def _record(s, at, kind, ok):
    """Keep a ping's outcome in the database (for `status`), when there is one (a SQLite file is never
    created for it; a PostgreSQL URL is no file: its tables tell)."""
    from scraper.db import store
    if not is_db_url(s.db_path) and not os.path.exists(s.db_path):
        return
    conn = store.connect(s.db_path)
    try:
        if schema.has_table(conn, "notifications"):
            store.record_notification(conn, at, kind, ok)
    finally:
        conn.close()


def fetch_failure(e, s):
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
