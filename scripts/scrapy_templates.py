"""Scrapy's side of the side-by-side bench (`scripts/bench_scrapy.py`): the n8n stand-in's listing, then each
template's detail, one JSON line a template stored. Only Scrapy is imported here: it runs in Scrapy's own
process, `scrapy runspider scripts/scrapy_templates.py -a api_url=URL -s ...`.

As a Scrapy user would write it: an answer that does not parse is a spider error, and its template is lost
(Scrapy retries network errors and the codes of RETRY_HTTP_CODES, not a callback's failure)."""

import json

import scrapy


class Templates(scrapy.Spider):
    name = "templates"

    def __init__(self, api_url: str, rows: str = "100", **kwargs):
        super().__init__(**kwargs)
        self.api_url, self.rows = api_url, int(rows)

    def listing(self, page: int) -> scrapy.Request:
        return scrapy.Request(f"{self.api_url}/templates/search?page={page}&rows={self.rows}",
                              callback=self.parse, cb_kwargs={"page": page})

    async def start(self):
        yield self.listing(1)

    def parse(self, response, page: int):
        data = json.loads(response.text)
        for item in data["workflows"]:
            yield scrapy.Request(f"{self.api_url}/templates/workflows/{item['id']}", callback=self.detail,
                                 cb_kwargs={"template_id": item["id"]})
        if page * self.rows < data["totalWorkflows"]:
            yield self.listing(page + 1)

    def detail(self, response, template_id: int):
        workflow = json.loads(response.text)["workflow"]
        yield {"id": template_id, "name": workflow["name"]}
