"""The topology tests share the chaos battery's fake GitHub fixture (a repository and an App)."""

from tests.chaos.conftest import github  # noqa: F401 (fixture)
