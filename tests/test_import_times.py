"""An import's times are ISO 8601 strings with an offset, as exports write them: a number (or a
string of digits) is a 400 naming the field, never a time in 1970; what this version exports
still imports."""

from typing import Any

import pytest

from approvals.models import AuditEvent
from checkpoints.models import Thread
from tests.factories import make_user
from tests.test_security_import import _set, api_client, hand_written_document, post_json

pytestmark = pytest.mark.django_db

NOT_A_TIME: dict[str, tuple[str, Any]] = {
    "exported_at is a number": ("exported_at", 5),
    "exported_at is a string of digits": ("exported_at", "1700000000"),
    "exported_at is a list": ("exported_at", []),
    "exported_at is an object": ("exported_at", {"at": "2024-05-01T10:00:00+00:00"}),
    "exported_at is true": ("exported_at", True),
    "exported_at has no offset": ("exported_at", "2024-05-01T10:00:00"),
    "created_at is a number": ("checkpoints.1.created_at", 5),
    "created_at is a float": ("checkpoints.1.created_at", 5.5),
    "created_at is a string of digits": ("checkpoints.0.created_at", "5"),
}


@pytest.mark.parametrize("name", NOT_A_TIME)
def test_a_time_that_is_not_an_iso_8601_string_is_a_400_naming_the_field_and_writes_nothing(
    name: str,
) -> None:
    field, value = NOT_A_TIME[name]
    document = hand_written_document(decided=False)
    _set(field, value)(document)

    response = post_json(api_client(make_user("olga", "operator")), "/api/imports", document)

    assert response.status_code == 400, response.content
    assert field in response.json()["detail"]
    assert not Thread.objects.exists()
    assert not AuditEvent.objects.exists()


def test_an_export_of_this_version_imports_again_with_its_times() -> None:
    client = api_client(make_user("ada", "admin"))
    document = hand_written_document(decided=False)
    document["exported_at"] = "2024-05-01T10:00:02Z"  # the Z form is ISO 8601 too
    document["checkpoints"][0]["created_at"] = "2024-05-01T12:00:00.250000+02:00"
    assert post_json(client, "/api/imports", document).status_code == 201, "hand-written"

    exported = client.get("/api/threads/hand-1/export").json()
    response = post_json(client, "/api/imports?thread_id=hand-2", exported)

    assert response.status_code == 201, response.content
    again = client.get("/api/threads/hand-2/export").json()
    assert [c["created_at"] for c in again["checkpoints"]] == [
        "2024-05-01T10:00:00.250000+00:00",
        "2024-05-01T10:00:01+00:00",
    ]
