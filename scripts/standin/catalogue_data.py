"""The events catalogue's content: N events made deterministically from a seed, and their changes.

Each event's fields follow from ``Random(f"{seed}:{id}")``, so one event is the same whatever N. Of the
first N events (sorted by id) a seeded shuffle picks ``round(N/4)`` to be script-rendered (``/live/``
pages) and, independently, ``round(N/5)`` whose JSON-LD has no organizer (the HTML still names it);
events added later get each with the same odds. Changes (``Catalogue.change``) bump ``lastmod`` to a time
later than every lastmod so far; removed events leave the sitemap and answer 404.
"""

import datetime as dt
import random
import re
import threading

UTC = dt.timezone.utc
LOCAL = dt.timezone(dt.timedelta(hours=2))
SITE_NAME = "City Events"
CURRENCY = "EUR"
PAGES_LASTMOD = dt.datetime(2025, 12, 1, 9, 0, tzinfo=UTC)
_BASE_LASTMOD = dt.datetime(2026, 1, 10, 8, 0, tzinfo=UTC)
_FIRST_DAY = dt.datetime(2026, 4, 1, tzinfo=LOCAL)

VENUES = (
    ("Kulturbrauerei", "Schönhauser Allee 36, 10435 Berlin"),
    ("Haus am See", "Uferweg 4, 10557 Berlin"),
    ("Alte Markthalle", "Marktplatz 1, 10178 Berlin"),
    ("Stadtbibliothek Mitte", "Brunnenstraße 181, 10119 Berlin"),
    ("Freiluftkino Park", "Parkallee 12, 10965 Berlin"),
    ("Club Zentrale", "Revaler Straße 99, 10245 Berlin"),
    ("Konzerthaus Süd", "Gendarmenmarkt 2, 10117 Berlin"),
    ("Gemeinschaftsgarten Nord", "Gartenweg 7, 13347 Berlin"),
)
ORGANIZERS = ("Kulturamt Mitte", "Jazz & Co e.V.", "Nachtbüro GmbH", "Lesekreis Berlin", "Open Air Collective",
              "Stadtteilzentrum Nord", "Klangwerk Agentur", "Freunde der Markthalle", "Kiezkultur e.V.",
              "Bühnenhaus Verlag")
ADJECTIVES = ("Harbour", "Midnight", "Spring", "Riverside", "Neon", "Garden", "Winter", "Courtyard", "Rooftop",
              "Sunday")
KINDS = (("Jazz Night", "music"), ("Book Reading", "literature"), ("Flea Market", "market"),
         ("Open Air Cinema", "film"), ("Techno Night", "nightlife"), ("Poetry Slam", "literature"),
         ("Food Festival", "food"), ("Chamber Concert", "music"), ("Comedy Show", "nightlife"),
         ("Photo Walk", "outdoor"), ("Street Art Tour", "art"), ("Wine Tasting", "food"))
TAGS = ("music", "literature", "market", "film", "nightlife", "food", "outdoor", "art", "family", "free")
PRICES = (0, 0, 5, 8, 12, 15, 20, 25, 35)
LINES = ("Doors open half an hour before the start.", "Tickets at the door while they last.",
         "Step-free access; please ask the staff for help.", "In English and German.",
         "Bring a blanket if the evening is cool.", "Children under 12 go free with an adult.")


def w3c(moment):
    """A W3C datetime with seconds and offset (``2026-01-10T08:00:00+00:00``)."""
    return moment.isoformat(timespec="seconds")


def slugify(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


class Event:
    """One event: what its page shows and how (``script``: a /live/ page rendered by its script)."""

    def __init__(self, seed, eid, script, organizer_in_jsonld, chunk, lastmod):
        rng = random.Random(f"{seed}:{eid}")
        kind, tag = rng.choice(KINDS)
        self.id, self.script, self.organizer_in_jsonld, self.chunk = eid, script, organizer_in_jsonld, chunk
        self.base_name = f"{rng.choice(ADJECTIVES)} {kind}"
        self.slug = slugify(self.base_name)
        self.venue, self.address = rng.choice(VENUES)
        self.organizer = rng.choice(ORGANIZERS)
        start = _FIRST_DAY + dt.timedelta(days=rng.randrange(120), hours=rng.randrange(10, 22),
                                          minutes=rng.choice((0, 30)))
        self.start, self.end = start, start + dt.timedelta(hours=rng.randrange(2, 5))
        self.price = rng.choice(PRICES)
        self.tags = sorted({tag, *rng.sample(TAGS, rng.randrange(0, 3))} | ({"free"} if not self.price else set()))
        self.line = rng.choice(LINES)
        self.version = 1
        self.lastmod = lastmod

    @property
    def path(self):
        return f"/{'live' if self.script else 'events'}/{self.slug}-{self.id}"

    @property
    def name(self):
        return self.base_name if self.version == 1 else f"{self.base_name} (revised {self.version})"

    @property
    def description(self):
        text = f"{self.base_name} at {self.venue}, organised by {self.organizer}. {self.line}"
        return text if self.version == 1 else f"{text} Programme updated (revision {self.version})."

    @property
    def price_text(self):
        return f"{self.price:.2f}"

    def edit(self, lastmod):
        self.version += 1
        self.price += 2.5
        self.end += dt.timedelta(minutes=30)
        self.lastmod = lastmod

    def record(self, site_url):
        """The expected record of a scraper (``/_standin/truth``)."""
        return {
            "id": self.id, "url": site_url + self.path, "name": self.name,
            "startDate": w3c(self.start), "endDate": w3c(self.end),
            "location_name": self.venue, "location_address": self.address,
            "price": self.price_text, "priceCurrency": CURRENCY, "organizer": self.organizer,
            "description": self.description, "tags": list(self.tags), "lastmod": w3c(self.lastmod),
            "script_rendered": self.script, "organizer_in_jsonld": self.organizer_in_jsonld,
        }

    def jsonld(self, site_url):
        """The schema.org Event of the page (the script of a /live/ page builds the same one)."""
        url = site_url + self.path
        data = {
            "@context": "https://schema.org", "@type": "Event", "name": self.name,
            "startDate": w3c(self.start), "endDate": w3c(self.end),
            "eventStatus": "https://schema.org/EventScheduled",
            "location": {"@type": "Place", "name": self.venue, "address": self.address},
            "offers": {"@type": "Offer", "price": self.price_text, "priceCurrency": CURRENCY, "url": url},
            "description": self.description, "url": url,
        }
        if self.organizer_in_jsonld:
            data["organizer"] = {"@type": "Organization", "name": self.organizer}
        return data

    def live_json(self, site_url):
        """``/api/live/<id>.json``: the raw data the /live/ page's script turns into JSON-LD and DOM."""
        return {"id": self.id, "title": self.name, "starts_at": w3c(self.start), "ends_at": w3c(self.end),
                "venue": {"name": self.venue, "address": self.address},
                "price": {"amount": self.price_text, "currency": CURRENCY}, "organizer": self.organizer,
                "organizer_in_schema": self.organizer_in_jsonld, "summary": self.description,
                "tags": list(self.tags), "url": site_url + self.path}


class Catalogue:
    """All events (removed ones too) and their changes, under one lock."""

    def __init__(self, events=60, seed=1):
        if not 1 <= int(events) <= 5000:
            raise ValueError("events must be within 1..5000")
        self.seed = seed
        self._lock = threading.Lock()
        rng = random.Random(f"catalogue:{seed}")
        ids = sorted(rng.sample(range(1000, 100000), int(events)))
        order = ids[:]
        rng.shuffle(order)
        script = set(order[: round(len(ids) / 4)])
        rng.shuffle(order)
        no_org = set(order[: round(len(ids) / 5)])
        half = (len(ids) + 1) // 2
        self.events = {}
        for i, eid in enumerate(ids):
            lastmod = _BASE_LASTMOD - dt.timedelta(minutes=rng.randrange(60 * 24 * 60))
            self.events[eid] = Event(seed, eid, eid in script, eid not in no_org, 1 if i < half else 2, lastmod)
        self.removed = set()
        self.lastmod_mode = "true"      # or "frozen" (edits keep their date), "build" (see catalogue.LASTMODS)
        self._chunk_changed = {1: None, 2: None}
        self._added = 0

    def _bump(self):
        """A lastmod later than every one so far, and not before now."""
        latest = max([e.lastmod for e in self.events.values()]
                     + [t for t in self._chunk_changed.values() if t is not None])
        now = dt.datetime.now(UTC).replace(microsecond=0)
        return max(now, latest + dt.timedelta(seconds=1))

    def live(self):
        """The events not removed, by id."""
        with self._lock:
            return [self.events[eid] for eid in sorted(self.events) if eid not in self.removed]

    def get(self, eid):
        """The event of ``eid`` if it is not removed, else None."""
        with self._lock:
            return None if eid in self.removed else self.events.get(eid)

    def change(self, add=0, edit=(), remove=()):
        """Add ``add`` new events, edit and remove the given ids; returns the ids added."""
        add, edit, remove = int(add), [int(i) for i in edit], [int(i) for i in remove]
        if not 0 <= add <= 1000:
            raise ValueError("add must be within 0..1000")
        with self._lock:
            for eid in [*edit, *remove]:
                if eid not in self.events or eid in self.removed:
                    raise ValueError(f"no event {eid}")
            for eid in edit:
                # a generator that never updates its dates: the page changes, its lastmod does not
                self.events[eid].edit(self.events[eid].lastmod if self.lastmod_mode == "frozen" else self._bump())
            for eid in remove:
                self.removed.add(eid)
                self._chunk_changed[self.events[eid].chunk] = self._bump()
            added = []
            for _ in range(add):
                self._added += 1
                rng = random.Random(f"catalogue:{self.seed}:added:{self._added}")
                eid = rng.randrange(100000, 1000000)
                while eid in self.events:
                    eid = rng.randrange(100000, 1000000)
                self.events[eid] = Event(self.seed, eid, rng.random() < 0.25, rng.random() >= 0.2, 2,
                                         self._bump())
                added.append(eid)
            return added

    def chunk(self, number):
        """The live events of sitemap ``events-<number>``, and its lastmod."""
        with self._lock:
            members = [self.events[e] for e in sorted(self.events)
                       if e not in self.removed and self.events[e].chunk == number]
            times = [e.lastmod for e in members] + [t for t in (self._chunk_changed.get(number),) if t]
        return members, (max(times) if times else PAGES_LASTMOD)

    def truth(self, site_url):
        """What ``/_standin/truth`` serves: the records of the live events, the removed ids, the pages."""
        events = self.live()
        with self._lock:
            removed = sorted(self.removed)
        return {"events": [e.record(site_url) for e in events], "removed": removed,
                "pages": [site_url + path for path in page_paths()], "seed": self.seed}


def page_paths():
    """The pages that are not events (listed in ``/sitemaps/pages.xml.gz``)."""
    return ["/", "/about", "/contact", *(f"/tags/{tag}" for tag in TAGS)]
