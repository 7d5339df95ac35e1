"""The ORM backend: Postgres in production, SQLite as the embedded default.

- `backend.py`: `OrmBackend`, the backend interface on Django's models.
- `statements.py`: the hot reads as SQL both databases run; `writes.py`: a checkpoint write
  and head move in one round trip; `prepared.py`: runs them as prepared statements on Postgres.
- `maintenance.py`: retention, storage accounting and key rotation.
- `store.py`: the cross-thread store.
"""

from checkpoints.backends.orm.backend import OrmBackend

__all__ = ["OrmBackend"]
