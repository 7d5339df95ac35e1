from django.db import migrations

# Conversation search matches the words of a message's values, never its field names: a
# search for "content" or "role" found every thread. gatehouse_message_words() reads the item
# as JSON (to_tsvector over jsonb takes string values only); text Postgres cannot read as
# jsonb (an encrypted row, NaN, a \u0000 escape) falls back to all its words, so a checkpoint
# write never fails on it. It costs a write no more than the text index did (fewer words).
WORDS_FUNCTION = """
CREATE OR REPLACE FUNCTION gatehouse_message_words(data text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN to_tsvector('simple'::regconfig, data::jsonb);
EXCEPTION WHEN others THEN
    RETURN to_tsvector('simple'::regconfig, COALESCE(data, ''));
END
$$
"""
VALUES_INDEX = (
    "CREATE INDEX IF NOT EXISTS storedvalue_item_words ON checkpoints_storedvalue"
    " USING gin (gatehouse_message_words(data)) WHERE run IS NOT NULL"
)
TEXT_INDEX = (
    "CREATE INDEX IF NOT EXISTS storedvalue_item_fts ON checkpoints_storedvalue"
    " USING gin (to_tsvector('simple'::regconfig, COALESCE(data, ''))) WHERE run IS NOT NULL"
)


def to_values(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(WORDS_FUNCTION)
        schema_editor.execute(VALUES_INDEX)
        schema_editor.execute("DROP INDEX IF EXISTS storedvalue_item_fts")


def to_text(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TEXT_INDEX)
        schema_editor.execute("DROP INDEX IF EXISTS storedvalue_item_words")
        schema_editor.execute("DROP FUNCTION IF EXISTS gatehouse_message_words(text)")


class Migration(migrations.Migration):
    dependencies = [("checkpoints", "0007_langgraph_saver")]

    operations = [migrations.RunPython(to_values, to_text)]
