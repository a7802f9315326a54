"""The engine: catalog, sandbox providers, scoring, statistics, store and Temporal orchestration."""

__version__ = "0.1.0"
