"""`make lint`: no SQL text outside the data layer (`scraper/db/`).

The data layer owns every statement, and where SQLite and PostgreSQL differ both spellings stand side by
side there (STYLE.md 23). Above it, the layers call its functions: a string literal (an f-string's text
included) under these folders that holds an SQL keyword is refused, with its file and line.

    .venv/bin/python -m scripts.check_sql_outside_db
"""

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHECKED = [ROOT / "scraper" / d for d in ("mirror", "products", "cli", "pool", "politeness", "sites", "net",
                                          "policy", "base")]
# upper case, as the project writes SQL: prose and log lines say "select" or "update" in lower case
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE FROM|CREATE|DROP|ALTER TABLE|PRAGMA|WHERE|JOIN|GROUP BY|"
                 r"ORDER BY|ON CONFLICT)\s")


def _docstrings(tree):
    """The ids of the docstring nodes (prose, not statements)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def offences(path):
    """[(first line, last line, text)] of the string literals of `path` that hold SQL."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skip = _docstrings(tree)
    inside_fstrings = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v for v in node.values if isinstance(v, ast.Constant)]
            inside_fstrings.update(id(v) for v in parts)
            text = "".join(str(v.value) for v in parts)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in skip or id(node) in inside_fstrings:
                continue
            text = node.value
        else:
            continue
        if SQL.search(text):
            found.append((node.lineno, node.end_lineno or node.lineno, text))
    return found


def main():
    bad, lines = [], 0
    for folder in CHECKED:
        for path in sorted(folder.rglob("*.py")):
            for first, last, text in offences(path):
                lines += last - first + 1
                bad.append(f"{path.relative_to(ROOT)}:{first}: SQL outside scraper/db/ "
                           f"({' '.join(text.split())[:60]!r}): move it into a module of the data layer")
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} statement(s), {lines} line(s) of SQL outside scraper/db/")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
