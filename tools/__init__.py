"""autoresearch-wiki: raw/ -> readers and detectors -> page objects -> writer -> wiki/ -> site."""

__version__ = "0.1.0"
