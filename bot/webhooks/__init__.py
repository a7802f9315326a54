"""The GitHub webhook endpoint: verify, de-duplicate, route by event and action, hand off."""
