"""A legal research agent for law-firm matters: retrieval over a matter's documents, clause
extraction, the matter database, permissions, drafting. Standard library only."""

__version__ = "1.4.0"
