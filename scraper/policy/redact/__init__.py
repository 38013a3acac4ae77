"""Credential redaction for exports (pure): what looks like a secret in a template becomes `[REDACTED]`.

The package imports one way: `patterns` (each pattern declared once, with the literals the fast path needs)
<- `rules` (what counts as a secret, the exact walk `value()`, the stored verdicts) <- `fast` (the export's
`workflow()`: the same result as `value()`, found without a regex call per string) <- `verdicts` (a stored
row redacted, and the verdict stored with it). This module gives
their public names; any of them also imports alone.
"""

from scraper.policy.redact.fast import workflow
from scraper.policy.redact.patterns import MARK
from scraper.policy.redact.rules import (
    COLUMNS,
    PASSWORD_KEYS,
    RULES_VERSION,
    SECRET_KEYS,
    looks_secret,
    might_hold_secret,
    norm,
    text,
    value,
)
from scraper.policy.redact.verdicts import decided, restore, row, stored, verdict

__all__ = ["COLUMNS", "MARK", "PASSWORD_KEYS", "RULES_VERSION", "SECRET_KEYS", "decided", "looks_secret",
           "might_hold_secret", "norm", "restore", "row", "stored", "text", "value", "verdict", "workflow"]
