"""The hourly prewarm job (`evalbot prewarm`, .github/workflows/prewarm.yml; docs/prewarm.md).

A scheduled job like infra/secrets: it resolves the agent repository's ref through the engine's
repository helpers, asks the configured provider to prewarm it, records the image in the store and
collects old ones. The images themselves are workflows/prewarm's.
"""

from infra.prewarm.prewarm_jobs import PrewarmJobs, prewarm_status

__all__ = ["PrewarmJobs", "prewarm_status"]
