"""The storage commands: key rotation and the benchmark."""

import json
from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, StoredValue
from checkpoints.tests.helpers import THREAD, conversation, start


@pytest.mark.django_db
def test_rotate_checkpoint_key_encrypts_everything_with_the_first_key(settings: Any) -> None:
    head = conversation(get_backend(), items=3, size=50)[-1]
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    out = StringIO()

    call_command("rotate_checkpoint_key", stdout=out)

    assert "Re-encrypted 3 rows" in out.getvalue()
    assert all(d.startswith("gAAAA") for d in StoredValue.objects.values_list("data", flat=True))
    assert get_backend().get(thread_id=THREAD).values == head.values


@pytest.mark.django_db
def test_rotate_checkpoint_key_moves_small_values_kept_inline_into_encrypted_rows(settings: Any) -> None:
    # Written before any key: a small value is kept inline in the checkpoint's row, readable.
    _, head = start(get_backend(), values={"plan": "refund ORD-1001", "messages": [{"content": "hi"}]})
    assert "refund ORD-1001" in json.dumps(Checkpoint.objects.get(pk=head.id).refs)
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()

    call_command("rotate_checkpoint_key", stdout=StringIO())

    refs = Checkpoint.objects.get(pk=head.id).refs
    assert "refund ORD-1001" not in json.dumps(refs)
    assert all(d.startswith("gAAAA") for d in StoredValue.objects.values_list("data", flat=True))
    assert get_backend().get(thread_id=THREAD) == head  # the same values under the same digest


@pytest.mark.django_db
def test_rotate_checkpoint_key_without_a_key_says_so() -> None:
    with pytest.raises(CommandError, match="CHECKPOINT_ENCRYPTION_KEY"):
        call_command("rotate_checkpoint_key", stdout=StringIO())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("writers", [1, 3])
def test_bench_checkpoints_reports_every_figure_as_json(django_db_blocker: Any, writers: int) -> None:
    out = StringIO()

    call_command(
        "bench_checkpoints", "--turns", "3", "--threads", "1", "--history-size", "60", "--raw-rows", "10",
        "--writers", str(writers), "--database", "test_gatehouse_bench_cmd", "--json", stdout=out,
    )  # fmt: skip

    result = json.loads(out.getvalue())
    # Each thread: the input, three model steps, two tool steps; at least one thread per writer.
    assert (result["threads"], result["writers"]) == (writers, writers)
    assert result["checkpoints"] == writers * (1 + 3 + 2)
    for key in (
        "checkpoints_per_s",
        "write_ms_p50",
        "write_ms_p99",
        "head_load_ms_p50",
        "history_page_ms_p50",
    ):
        assert result[key] > 0
    if connection.vendor == "postgresql":  # pg_stat_wal's flush count: commits share flushes
        assert result["checkpoints_per_wal_flush"] > 0
    assert result["storage_ratio"] > 0 and result["raw_insert_per_s"] > 0


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_bench_langgraph_reports_medians_of_both_savers_beside_the_targets() -> None:
    out = StringIO()

    call_command("bench_langgraph", "--turns", "3", "--runs", "2", "--json", stdout=out)

    result = json.loads(out.getvalue())["T=3"]
    assert result["runs"] == 2
    for saver in ("gatehouse", "postgres_saver"):
        assert result[saver]["checkpoints_per_s"] > 0 and result[saver]["storage_bytes"] > 0
        by_role = [result[saver][f"storage_{role}_rows_bytes"] for role in ("checkpoint", "value", "write")]
        assert sum(by_role) == result[saver]["storage_bytes"] and all(by_role)
    assert (result["checkpoints_per_s_x_target"], result["storage_less_x_target"]) == (2, 10)
    assert result["storage_less_x"] > 0


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor == "postgresql", reason="SQLite: the comparison needs Postgres")
def test_bench_langgraph_says_it_is_skipped_on_sqlite_so_make_bench_goes_on() -> None:
    out = StringIO()

    call_command("bench_langgraph", "--json", stdout=out)  # no CommandError: make would stop

    assert json.loads(out.getvalue()) == {
        "skipped": "bench_langgraph compares savers on PostgreSQL; set DATABASE_URL"
    }
