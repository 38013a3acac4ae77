"""scraper: a polite, resumable, multi-process scraper of the n8n.io workflow library."""

__version__ = "0.1.0"
