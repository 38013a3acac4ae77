"""`make lint`: no module of the package imports another module's private name (`from x import _y`).

A private name taken across modules is the smell of a cut made to keep a file short (STYLE.md 22): make
the helper public where it is shared, or keep it where it is used.

    .venv/bin/python -m scripts.check_private_imports
"""

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "scraper"
EXCLUDED = ()


def offences(path):
    """[(line, module, name)] of the private names `path` imports from another module of the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "scraper":
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append((node.lineno, node.module, alias.name))
    return found


def main():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(path.is_relative_to(x) for x in EXCLUDED):
            continue
        bad += [f"{path.relative_to(ROOT)}:{line}: imports the private name {name} of {module}"
                for line, module, name in offences(path)]
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
