"""Real n8n API answers assembled from the fixture files in tests/fixtures/n8n.

A detail answer (GET /templates/workflows/{id}) is a search item plus the template's workflow
definition, as the shapes in the project notes describe. The search data has no `categories` nor
`image`: categories default to the names of the node categories of the template's nodes (real n8n
category names) and images to none, unless the caller gives them.
"""

import copy
import json
from collections import Counter
from functools import lru_cache
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "n8n"


@lru_cache(maxsize=None)
def _load(name):
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def search_items() -> list[dict]:
    """The 100 items of the real first search page (a fresh copy)."""
    return copy.deepcopy(_load("search_page1_rows100.json"))


def search_answer(total: int = 6022) -> dict:
    """A whole search answer around the real first page."""
    return {"totalWorkflows": total, "workflows": search_items(), "filters": []}


def definition_ids() -> list[int]:
    """Ids of the 20 templates whose workflow definition is in the fixtures."""
    return [item["id"] for item in _load("workflow_definitions_20.json")]


def definition(template_id: int) -> dict:
    """The importable workflow object of a template (6270 from its untouched answer)."""
    if template_id == 6270:
        return copy.deepcopy(_load("workflows_templates_6270.json")["workflow"])
    for item in _load("workflow_definitions_20.json"):
        if item["id"] == template_id:
            return copy.deepcopy(item["workflow"])
    raise KeyError(template_id)


def detail_answer(template_id: int, categories=None, image=None, **overrides) -> dict:
    """The detail answer of one template; `overrides` replace fields of the inner `workflow` object."""
    item = next(i for i in search_items() if i["id"] == template_id)
    inner = definition(template_id)
    types = Counter(node["type"] for node in inner["nodes"])
    if categories is None:
        names = [c["name"] for node in item["nodes"] for c in node.get("nodeCategories") or []]
        categories = [{"id": i, "name": n} for i, n in enumerate(dict.fromkeys(names), start=1)]
    workflow = {
        **item,
        "views": item["totalViews"],
        "recentViews": 0,
        "workflowInfo": {"nodeCount": len(inner["nodes"]), "nodeTypes": {t: {"count": c} for t, c in types.items()}},
        "categories": categories,
        "image": image or [],
        "workflow": inner,
    }
    workflow.update(overrides)
    return {"workflow": workflow}


def detail_body(template_id: int, **kwargs) -> bytes:
    """The detail answer as the bytes the API sends."""
    return json.dumps(detail_answer(template_id, **kwargs), ensure_ascii=False).encode("utf-8")
