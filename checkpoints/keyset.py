"""Walk a table in primary-key order a batch at a time, each batch in a transaction of its own.

Key rotation rewrites every row of several tables: keyset pagination (`pk > last`) neither
holds one long transaction nor skips or repeats rows as OFFSET would while rows change.
"""

from collections.abc import Iterator
from typing import Any

from django.db import models, transaction


def batches(
    rows: models.QuerySet[Any], *fields: str | models.Expression, batch_size: int
) -> Iterator[list[Any]]:
    """(pk, *fields) of every row, in batches of batch_size; the caller's work on a batch
    commits (on the rows' database) before the next is read. A composite primary key compares
    as a tuple."""
    if batch_size < 1:  # [:0] would end the walk at once, as if every row were done
        raise ValueError(f"batch_size must be positive, not {batch_size}")
    rows, last = rows.order_by("pk"), None
    while batch := list(
        (rows if last is None else rows.filter(pk__gt=last)).values_list("pk", *fields)[:batch_size]
    ):
        with transaction.atomic(using=rows.db):
            yield batch
        last = batch[-1][0]
