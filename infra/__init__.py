"""Scheduled jobs and deployment: prewarm, Vault -> provider secret sync, images."""
