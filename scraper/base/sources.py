"""A source: one site to mirror, of one kind, on its own cadence (the sources file's `[[source]]`).

Minimal copy for branch `catalogue` (the shape of the shared contract); branch `sources` owns this
module and adds the file loading and validation.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Source:
    name: str                 # [a-z0-9-]+, unique
    kind: str                 # "n8n" | "catalogue"
    enabled: bool = True
    priority: int = 1         # 1 is first
    every: str = "1d"         # as written in the file
    every_s: float = 86400.0
    rate: float | None = None  # for its domain(s); None: the defaults
    burst: int | None = None
    options: tuple = ()       # the kind's own keys as sorted (key, value) pairs (frozen)

    def opt(self, key, default=None):
        """The kind's own key `key`, or `default`."""
        for k, v in self.options:
            if k == key:
                return v
        return default
