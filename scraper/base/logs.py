"""Log lines for people and for cron: every line starts with a timestamp, and on a terminal a line
never lands on the progress bar."""

import logging
import sys
import time

# what `logging` prints by default for %(asctime)s, so log lines and the CLI's own lines look alike
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
CLEAR_LINE = "\r\x1b[K"     # back to column 0 and erase: the progress bar's line becomes the log line's


def stamp(now=None):
    """`2026-11-26 02:30:00,123`: the timestamp every line starts with."""
    now = time.time() if now is None else now
    return time.strftime(TIME_FORMAT, time.localtime(now)) + f",{int(now % 1 * 1000):03d}"


def is_terminal(stream):
    return hasattr(stream, "isatty") and stream.isatty()


class Formatter(logging.Formatter):
    """`<stamp> LEVEL message`; on a terminal it first erases the progress bar, which the supervisor
    redraws below within half a second (worker processes share the terminal, so this works for them too)."""

    def __init__(self, terminal=False):
        super().__init__("%(message)s")
        self.prefix = CLEAR_LINE if terminal else ""

    def format(self, record):
        text = super().format(record)
        head = f"{self.prefix}{stamp(record.created)} {record.levelname} "
        return head + text.replace("\n", "\n" + head)


def setup(level, stream=None):
    """One stderr handler with the timestamped format, for this process and the workers it forks.

    Like `logging.basicConfig`, it leaves alone a root logger that someone else configured (a test
    runner capturing logs); its own handler from an earlier call is replaced."""
    stream = sys.stderr if stream is None else stream
    root = logging.getLogger()
    root.setLevel(level)
    for old in list(root.handlers):
        if getattr(old, "scraper", False):
            root.removeHandler(old)
    if root.handlers:
        return
    handler = logging.StreamHandler(stream)
    handler.scraper = True
    handler.setFormatter(Formatter(is_terminal(stream)))
    root.addHandler(handler)


def stamped(text, now=None):
    """`text` with every line timestamped (blank lines dropped): the CLI's result lines and `Error:` lines."""
    head = stamp(now) + " "
    return "\n".join(head + line for line in text.split("\n") if line.strip())
