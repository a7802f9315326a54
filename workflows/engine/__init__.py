"""Temporal orchestration: the experiment and run workflows, their stage activities, the worker,
the embedded dev server, and the client functions the CLI and the bot call."""
