"""`evalbot` subcommands, one module per concern; bot/cli.py combines them in one place."""
