"""The docs stay true to the code (issue 46): every module (a `scraper/...` path, a dotted `scraper.` name, or
a layer-relative name such as `db/store`), table and command that README.md and docs/*.md name exists: a
module as a file, a table in a freshly migrated database, a command in the click group. And the tables
section of docs/architecture.md names every table a fresh database has. Cheap: files and one in-memory
database (PostgreSQL's names on a migrated PostgreSQL database where one can run)."""

import importlib
import re
import shlex

import click
import pytest

from scraper.cli import main
from scraper.db import schema, store
from tests.helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
LAYERS = ("base", "policy", "db", "net", "politeness", "mirror", "pool", "products", "sites", "cli")
# files the docs name that look like dotted module names: the cron log, the configuration file
NOT_MODULES = {"scraper.log", "scraper.toml"}
PATH = re.compile(r"(?<![\w/.])(scraper/[a-z_][a-z0-9_/]*(?:\.py)?)")            # scraper/0.1.0 is a User-Agent
DOTTED = re.compile(r"(?<![\w/.])(scraper(?:\.[a-z_][a-z0-9_]*)+)")
RELATIVE = re.compile(rf"((?:{'|'.join(LAYERS)})/[a-z0-9_/]+)(?:\.py)?")
TABLE_PROSE = re.compile(r"`([a-z_]+)` (?:table|view)\b|\btables? `([a-z_]+)`((?:(?:,| and) `[a-z_]+`)*)")
SQLITE_CATALOGUE = {"sqlite_master"}        # SQLite's own, which a guide may name


def spans(path):
    """The inline code of a document (fenced blocks left out)."""
    prose = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", prose)


def named_modules():
    """{(document, name as written, the path it means or the dotted name)}."""
    found = set()
    for doc in DOCS:
        for span in spans(doc):
            found |= {(doc.name, p, p) for p in PATH.findall(span)}
            found |= {(doc.name, d, d) for d in DOTTED.findall(span) if d not in NOT_MODULES}
            relative = RELATIVE.fullmatch(span)
            if relative:
                found.add((doc.name, span, "scraper/" + relative.group(1)))
    return found


def module_exists(name):
    """A path: the file or the package folder is there. A dotted name: the longest leading part that is a
    module's file, and the rest an attribute of it (`scraper.products.search.rebuild`)."""
    if "/" in name:
        path = ROOT / name.rstrip("/")
        return path.is_dir() or path.is_file() or path.with_suffix(".py").is_file()
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            thing = importlib.import_module(".".join(parts[:cut]))
            for attribute in parts[cut:]:
                if not hasattr(thing, attribute):
                    return False
                thing = getattr(thing, attribute)
            return True
    return False


def test_every_module_the_docs_name_exists():
    named = named_modules()
    assert len(named) >= 100, len(named)        # the module table alone names every module
    missing = sorted(f"{doc}: `{written}`" for doc, written, name in named if not module_exists(name))
    assert not missing, "the docs name modules that do not exist:\n" + "\n".join(missing)


# --- tables --------------------------------------------------------------------------------------------

def fresh_tables(conn):
    """The tables and views of a freshly migrated database, FTS5's shadow tables left out."""
    virtual = schema.virtual_tables(conn)
    return {n for n in schema.tables(conn) if not any(n.startswith(v + "_") for v in virtual)} | virtual


@pytest.fixture(scope="module")
def sqlite_tables():
    conn = store.open_db(":memory:")
    try:
        views = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
        return fresh_tables(conn) | views
    finally:
        conn.close()


def architecture_tables():
    """The names in the first column of docs/architecture.md's tables section (`a`, `b` share a row)."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Tables"):text.index("## Processes")]
    return {name for row in re.findall(r"^\| ((?:`[a-z_]+`(?:, )?)+)", section, re.M)
            for name in re.findall(r"`([a-z_]+)`", row)}


def prose_tables():
    """{(document, table)} of "the `x` table", "tables `a`, `b` and `c`" in every document."""
    found = set()
    for doc in DOCS:
        text = " ".join(doc.read_text().split())
        for m in TABLE_PROSE.finditer(text):
            for name in [m.group(1) or m.group(2), *re.findall(r"`([a-z_]+)`", m.group(3) or "")]:
                found.add((doc.name, name))
    return found


def limiter_tables(tmp_path):
    """The tables of the SQLite limiter's own file (`<db>-limiter`, db/ratelog), which the guides name too."""
    from scraper.db import ratelog
    conn = ratelog.connect(str(tmp_path / "jobs.db-limiter"))
    try:
        ratelog.create(conn)
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def test_every_table_the_docs_name_is_in_a_freshly_migrated_database(request, sqlite_tables, tmp_path):
    named = {("architecture.md", n) for n in architecture_tables()} | prose_tables()
    assert len(named) >= 30, len(named)
    known = sqlite_tables | limiter_tables(tmp_path) | SQLITE_CATALOGUE
    left = {(doc, n) for doc, n in named if n not in known}
    if left:        # PostgreSQL's own (its search tables, its schema_version): on a migrated PostgreSQL database
        url = request.getfixturevalue("pg_migrated_url")
        conn = store.connect(url)
        try:
            pg = schema.tables(conn)
        finally:
            conn.close()
        left = {(doc, n) for doc, n in left if n not in pg}
    assert not left, "the docs name tables a fresh database does not have: " + ", ".join(
        f"{doc}: `{n}`" for doc, n in sorted(left))


def test_the_architectures_tables_section_names_every_table_of_a_fresh_database(sqlite_tables):
    missing = sorted(sqlite_tables - architecture_tables())
    assert not missing, f"docs/architecture.md's Tables section misses {missing}"



def test_the_architectures_modules_table_has_a_row_for_every_module():
    """Both ways: a module added (or moved) without its row fails here, as a row naming a module that is gone
    fails above. The command modules share the `cli` row, which lists them by name."""
    text = ARCHITECTURE.read_text()
    rows = set(re.findall(r"^\| `([a-z0-9_/]+)` \|", text, re.M))
    cli_row = re.search(r"^\| `cli` \(([^)]*)\)", text, re.M)
    assert cli_row, "docs/architecture.md has no `cli` row listing the command modules"
    rows |= {f"cli/{name}" for name in re.findall(r"`([a-z_]+)`", cli_row.group(1))}
    package = ROOT / "scraper"
    modules = {str(path.relative_to(package).with_suffix("")).removesuffix("/__init__")
               for path in package.rglob("*.py") if path.name != "__main__.py"}
    # the package itself, and the layers' own packages (the Layers section draws them; the `cli` row names the
    # group's `__init__`)
    modules -= {"__init__", *LAYERS}
    missing = sorted(m for m in modules if m not in rows and f"{m}/__init__" not in rows)
    assert not missing, f"docs/architecture.md's modules table has no row for {missing}"

# --- commands ------------------------------------------------------------------------------------------

RUN = re.compile(r"(?:^|[\s$(|;&])(?:\.venv/bin/)?scraper((?:\s+\S+)+)")


def named_commands():
    """{(document, the word in the command's place, the line)} of every `scraper ...` in code (fenced blocks
    and inline), the group's options and their values skipped."""
    takes_value = {o for p in main.params if isinstance(p, click.Option) and not p.is_flag for o in p.opts}
    found = set()
    for doc in DOCS:
        text = doc.read_text()
        pieces = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M) + spans(doc)
        for line in (line for piece in pieces for line in piece.splitlines()):
            for m in RUN.finditer(line):
                try:
                    words = shlex.split(m.group(1), comments=True)
                except ValueError:          # an unclosed quote further on: the words before it still tell
                    words = m.group(1).split()
                i = 0
                while i < len(words) and words[i].startswith("-"):
                    i += 1 if "=" in words[i] or words[i] not in takes_value else 2
                if i < len(words):
                    found.add((doc.name, words[i].strip("`'\".,;:)"), line.strip()))
    return found


def test_every_command_the_docs_name_is_in_the_group():
    named = named_commands()
    assert len({word for _, word, _ in named}) >= 20, named
    commands = set(main.list_commands(click.Context(main)))
    unknown = sorted(f"{doc}: {word!r} in {line!r}" for doc, word, line in named if word not in commands)
    assert not unknown, "the docs name commands the group does not have:\n" + "\n".join(unknown)
