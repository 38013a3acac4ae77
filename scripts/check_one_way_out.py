"""`make lint`: one way out. Every request to a site leaves through the polite client
(`scraper/politeness/client.py`: rate slot, robots.txt, 429 pause, breaker, proxies, request log), so no
other module of the package may hold the means to send one (STYLE.md 25):

- import an HTTP library (requests, urllib3, httpx, urllib.request, http.client, aiohttp, playwright,
  websockets), other than for annotations (under `if TYPE_CHECKING:`);
- use the transport's request functions: `scraper.net.http.fetch` or `make_session`;
- use the browser that renders pages: `scraper.net.browser.BrowserFetcher`, or what it renders remote pages
  with: `scraper.net.cdp.Connection`, `scraper.net.cdppage.render`.

The transport itself (`scraper/net/`) and the client are where they live; ALLOWED names the few other
modules that may, each with its reason. An offence is printed with its file, line and what it uses.

    .venv/bin/python -m scripts.check_one_way_out
"""

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "scraper"
CLIENT = "scraper/politeness/client.py"
TRANSPORT = "scraper/net/"
ALLOWED = {
    # its probe of proxy_check_url: the operator's own URL through each proxy, not a site
    "scraper/politeness/proxypool.py": {"scraper.net.http.fetch", "scraper.net.http.make_session"},
    # youtube-transcript-api sends its own requests on the requests Session it is given; the adapter mounted
    # on it asks the job's Context (the polite client bound to the job) for its turn before each one and logs it
    "scraper/sites/youtube.py": {"requests"},
}
LIBRARIES = ("requests", "urllib3", "httpx", "urllib.request", "http.client", "aiohttp", "playwright", "websockets")
SENDERS = {"scraper.net.http": ("fetch", "make_session"), "scraper.net.browser": ("BrowserFetcher",),
           "scraper.net.cdp": ("Connection",), "scraper.net.cdppage": ("render",)}


def _library(module):
    return next((lib for lib in LIBRARIES if module == lib or module.startswith(lib + ".")), None)


def _type_only(tree):
    """The ids of the nodes under `if TYPE_CHECKING:` (annotations send nothing)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return found


def offences(path, relative=None):
    """[(line, what)] of the means to send a request that `path` uses (`relative`: its path in the repo,
    for its allowances)."""
    allowed = ALLOWED.get(relative, set())
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    aliases = {}    # local name -> the module of SENDERS it stands for
    found = []
    type_only = _type_only(tree)

    def offend(line, what):
        if what not in allowed and what.split(".")[0] not in allowed:
            found.append((line, what))

    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if _library(a.name):
                    offend(node.lineno, a.name)
                if a.name in SENDERS:
                    aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _library(node.module):
                offend(node.lineno, node.module)
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in SENDERS:
                    aliases[a.asname or a.name] = full
                elif a.name in SENDERS.get(node.module, ()):
                    offend(node.lineno, full)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = aliases[node.value.id]
            if node.attr in SENDERS[module]:
                offend(node.lineno, f"{module}.{node.attr}")
    return sorted(set(found))


def main():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative == CLIENT or relative.startswith(TRANSPORT):
            continue
        for line, what in offences(path, relative):
            bad.append(f"{relative}:{line}: {what} sends requests outside the polite client: send through "
                       f"scraper.politeness.client (or say in scripts/check_one_way_out.py why it may)")
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} way(s) out beside the polite client")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
