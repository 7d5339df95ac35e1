"""The keyset walk that key rotation rewrites every table with."""

from typing import Any

import pytest
from cryptography.fernet import Fernet

from checkpoints.backends import get_backend
from checkpoints.keyset import batches
from checkpoints.models import StoredValue
from checkpoints.tests.helpers import conversation


@pytest.mark.django_db
def test_batches_visit_every_row_of_a_composite_key_once_in_key_order() -> None:
    conversation(get_backend(), items=7, size=50)
    keys = sorted(StoredValue.objects.values_list("pk", flat=True))
    assert len(keys) >= 5  # several batches of two

    walked = [list(batch) for batch in batches(StoredValue.objects.all(), "data", batch_size=2)]

    assert all(len(batch) <= 2 for batch in walked)
    assert [pk for batch in walked for pk, _ in batch] == keys


@pytest.mark.django_db
def test_rotation_in_small_batches_seals_every_value_once(settings: Any) -> None:
    head = conversation(get_backend(), items=7, size=50)[-1]
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()

    rewritten = get_backend().reseal(batch_size=2)

    assert rewritten == StoredValue.objects.count()
    assert all(d.startswith("gAAAA") for d in StoredValue.objects.values_list("data", flat=True))
    assert get_backend().get(thread_id=head.thread_id).values == head.values
