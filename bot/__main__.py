"""`python -m bot ...` is the `evalbot` command."""

from bot.cli import main

main()
