"""The surfaces people touch: the `evalbot` CLI, the GitHub webhook app and the report rendering."""
