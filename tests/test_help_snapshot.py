"""Every command's --help, compared with tests/snapshots/help.txt.

A change of layout must change no help text; an issue that adds an option updates the snapshot on purpose:
`SCRAPER_UPDATE_SNAPSHOT=1 .venv/bin/python -m pytest tests/test_help_snapshot.py`.
"""

import os
from pathlib import Path

import click
from click.testing import CliRunner

from scraper.cli import main

SNAPSHOT = Path(__file__).parent / "snapshots" / "help.txt"


def all_help() -> str:
    """The --help of the group and of every command, in name order, at a fixed terminal width."""
    runner = CliRunner()
    parts = []
    ctx = click.Context(main)
    for args in [[]] + [[name] for name in sorted(main.list_commands(ctx))]:
        result = runner.invoke(main, [*args, "--help"], terminal_width=100, prog_name="scraper")
        assert result.exit_code == 0, result.output
        parts.append(f"=== scraper {' '.join(args)} --help\n{result.output}")
    return "\n".join(parts)


def test_help_text_matches_the_snapshot():
    text = all_help()
    if os.environ.get("SCRAPER_UPDATE_SNAPSHOT"):
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text(), "a --help changed: update the snapshot on purpose (see this module)"
