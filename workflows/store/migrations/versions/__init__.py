"""One file per revision, named `NNNN_slug.py`; Alembic skips this __init__."""
