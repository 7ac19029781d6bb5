"""Store the runs' and steps' hex digests as the bytes they spell (ADR 0092): half the bytes,
read back as the same hex text.

On PostgreSQL each column becomes ``bytea`` (``decode(column, 'hex')``), one rewrite per
table. On SQLite the declared type stays (a column of text affinity keeps a blob as a
blob) and each value is rewritten; SQLite before 3.41 has no ``unhex``, so Python spells
them. Backwards, each digest is hex text again.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

import runs_app.fields

# table: {column: its length as hex text}
DIGESTS = {
    "runs_app_run": {"head_hash": 64, "salt": 32, "moved_from": 64},
    "runs_app_step": {"flow_hash": 64, "payload": 64, "prev_hash": 64, "hash": 64},
}
BATCH = 2000


def to_bytes(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    qn = schema_editor.quote_name
    for table, columns in DIGESTS.items():
        if schema_editor.connection.vendor == "postgresql":
            changes = ", ".join(
                f"ALTER COLUMN {qn(c)} TYPE bytea USING decode({qn(c)}, 'hex')" for c in columns
            )
            schema_editor.execute(f"ALTER TABLE {qn(table)} {changes}")
            continue
        names = list(columns)
        select = (
            f"SELECT id, {', '.join(map(qn, names))} FROM {qn(table)} WHERE id > %s ORDER BY id"
        )
        update = f"UPDATE {qn(table)} SET {', '.join(f'{qn(c)} = %s' for c in names)} WHERE id = %s"
        last = 0
        with schema_editor.connection.cursor() as cursor:
            while True:
                cursor.execute(select + f" LIMIT {BATCH}", [last])
                rows = cursor.fetchall()
                if not rows:
                    break
                cursor.executemany(
                    update, [[*(bytes.fromhex(v) for v in row[1:]), row[0]] for row in rows]
                )
                last = rows[-1][0]


def to_hex(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    qn = schema_editor.quote_name
    for table, columns in DIGESTS.items():
        if schema_editor.connection.vendor == "postgresql":
            changes = ", ".join(
                f"ALTER COLUMN {qn(c)} TYPE varchar({n}) USING encode({qn(c)}, 'hex')"
                for c, n in columns.items()
            )
            schema_editor.execute(f"ALTER TABLE {qn(table)} {changes}")
            continue
        sets = ", ".join(f"{qn(c)} = lower(hex({qn(c)}))" for c in columns)
        schema_editor.execute(f"UPDATE {qn(table)} SET {sets}")


def digest(name: str, **options: object) -> migrations.AlterField:
    model, field = name.split(".")
    return migrations.AlterField(
        model_name=model, name=field, field=runs_app.fields.HexDigestField(**options)
    )


class Migration(migrations.Migration):
    dependencies = [("runs_app", "0020_run_indexes_no_step_column")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                digest("run.head_hash", default="0" * 64, editable=True),
                digest("run.salt", blank=True, default=""),
                digest("run.moved_from", blank=True, default=""),
                digest("step.flow_hash", blank=True, default="", editable=True),
                digest("step.payload", blank=True, default="", editable=True),
                digest("step.prev_hash", editable=True),
                digest("step.hash", editable=True),
            ],
            database_operations=[migrations.RunPython(to_bytes, to_hex)],
        )
    ]
