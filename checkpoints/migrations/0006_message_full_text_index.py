from django.db import migrations

# Conversation search (approvals.thread_selectors) as Postgres full-text search over list items
# (messages), in place of a trigram index: it costs a checkpoint write about half as much and
# the disk an eighth (docs/storage.md, "Benchmark"). The expression is the one Django's
# SearchVector("data", config="simple") emits, so the planner matches the query to the index.
# SQLite scans; it is the single-machine default.
FULL_TEXT_INDEX = (
    "CREATE INDEX IF NOT EXISTS storedvalue_item_fts ON checkpoints_storedvalue"
    " USING gin (to_tsvector('simple'::regconfig, COALESCE(data, ''))) WHERE run IS NOT NULL"
)
TRIGRAM_INDEX = (
    "CREATE INDEX IF NOT EXISTS storedvalue_item_trgm ON checkpoints_storedvalue"
    " USING gin (UPPER(data) gin_trgm_ops) WHERE run IS NOT NULL"
)


def to_full_text(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS storedvalue_item_trgm")
        schema_editor.execute(FULL_TEXT_INDEX)


def to_trigram(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS storedvalue_item_fts")
        schema_editor.execute(TRIGRAM_INDEX)


class Migration(migrations.Migration):
    dependencies = [("checkpoints", "0005_thread_list_indexes")]

    operations = [migrations.RunPython(to_full_text, to_trigram)]
