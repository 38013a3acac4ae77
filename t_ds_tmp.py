import asyncio, json, os
from scraper.db import store
from scraper.sites import n8n
from scraper.products import browse
from tests.helpers import definition_ids, detail_body
db = "/tmp/t_ds.db"
for f in (db, db+"-wal", db+"-shm"):
    if os.path.exists(f): os.remove(f)
conn = store.open_db(db)
for tid in definition_ids()[:6]:
    store.upsert(conn, "workflows", n8n.extract(detail_body(tid), "2026-01-02T03:04:05+00:00"), "id")
print(conn.execute("select id, url, length(workflow) from templates").fetchall())
ds = browse.app(db, conn)
async def main():
    await ds.invoke_startup()
    c = ds.client
    for u in ["/t_ds", "/t_ds/templates.json?_search=seedance&_shape=array", "/t_ds/workflows", "/t_ds/answers.json", "/t_ds.json?sql=select+1", "/t_ds/workflows_fts", "/t_ds/templates?_facet_array=categories", "/t_ds/recent_changes.json", "/t_ds/top_node_types.json?_shape=array", "/t_ds/failures.json", "/t_ds.db", "/t_ds/workflows/5338.json", "/-/databases.json"]:
        r = await c.get(u)
        print(u, r.status_code, r.text[:200].replace("\n"," "))
asyncio.run(main())
