"""A step's three statements, written once (ADR 0095): the locked read of a run, the UPDATE
of the columns a step changes, and the INSERT of the step; on PostgreSQL the UPDATE and the
INSERT are one statement (ADR 0095).

Through the ORM, building these statements cost a step about fifteen times what the
database did: a queryset, a compiler, an ORDER BY and a select_related of every column of
the flow version (its whole YAML text) on every call. Here each statement's SQL is built
once per database vendor, from the models' ``_meta`` (tables and columns quoted by the
connection), and nothing else changes: parameters are prepared by the model fields
(``pre_save`` and ``get_db_prep_save``), values read back go through the converters the
ORM would apply (the backend's, then the field's: JSON text to an object, SQLite's text
to an aware datetime), and the instances are ordinary model instances.

The run read for a step has every column loaded. Its flow version is attached with only
``flow_id`` and ``content_hash``: what ``flows_app.selectors.flow_of_version`` needs to
find the flow (the live one, or its per-process cache); the text itself is read, deferred,
only when neither has it.

Used by ``runs_app.selectors.run_get`` (its locked read) and ``runs_app.recording.step_record``,
nothing else.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.db import DEFAULT_DB_ALIAS, NotSupportedError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, ForeignKey
from django.db.transaction import TransactionManagementError

from access_app.callers import KEY_OWNER
from flows_app.models import FlowVersion
from runs_app.models import Run, Step

# What a step's read takes of the run's flow version: enough to find the flow, and its
# version for the events a step records (runs_app.events, spec §8).
VERSION_FIELDS = ("content_hash", "flow_id", "version")

_RUN_FIELDS: tuple[Field[Any, Any], ...] = tuple(Run._meta.concrete_fields)
_VERSION_FIELDS: tuple[Field[Any, Any], ...] = tuple(
    f for f in FlowVersion._meta.concrete_fields if f.attname in VERSION_FIELDS
)
# FlowVersion.from_db takes values in the model's field order: its pk, then these.
_VERSION_NAMES = [FlowVersion._meta.pk.attname, *(f.attname for f in _VERSION_FIELDS)]
_RUN_NAMES = [f.attname for f in _RUN_FIELDS]
_FLOW_VERSION = cast("ForeignKey[Any, Any]", Run._meta.get_field("flow_version"))
_PUBLIC_ID = cast("Field[Any, Any]", Run._meta.get_field("public_id"))
# The step's columns, as an INSERT by the ORM writes them: all but the generated id.
_STEP_FIELDS: tuple[Field[Any, Any], ...] = tuple(
    f for f in Step._meta.concrete_fields if f is not Step._meta.auto_field and not f.generated
)


@dataclass(frozen=True)
class Visibility:
    """Which runs a caller may see, as the read's WHERE clause states it
    (``runs_app.selectors.visibility`` decides): every run, the runs of one ``owner``, or
    the runs no key started (``keyless``). A run outside it is not read at all, so it is
    refused exactly as a run that does not exist is: no row, the same code path, the same
    time (ADR 0072)."""

    every: bool = False
    owner: str | None = None
    keyless: bool = False

    def params(self) -> tuple[bool, str | None, bool, str]:
        return (self.every, self.owner, self.keyless, KEY_OWNER + "%")


Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]
ReadConverters = tuple[tuple[int, tuple[Converter, ...], Any], ...]


def _column(field: Field[Any, Any]) -> str:
    if field.column is None:  # a concrete field always has one
        raise NotSupportedError(f"{field} has no column")
    return field.column


@dataclass(frozen=True)
class _Sql:
    """The statements' text for one database vendor."""

    read: str
    insert: str
    returning: bool  # whether ``insert`` returns the new id (else the cursor's lastrowid)
    # The step's INSERT taking its row from the run's UPDATE, when the two go as one
    # statement (an UPDATE in a WITH clause: PostgreSQL's; SQLite's WITH takes only a
    # SELECT); None where they do not.
    insert_from_update: str | None


_sql: dict[str, _Sql] = {}
_UPDATED = "updated"  # the WITH clause's name for the row the run's UPDATE returns
_NOT_UPDATED = "Save with update_fields did not affect any rows."  # as Model.save says
_updates: dict[tuple[str, tuple[str, ...]], tuple[str, tuple[Field[Any, Any], ...]]] = {}
_updates_with_insert: dict[tuple[str, tuple[str, ...]], str] = {}
# Per connection object: the converters of the read's columns, as the ORM's compiler
# resolves them (the backend's are bound to the connection they came from).
_converters: weakref.WeakKeyDictionary[BaseDatabaseWrapper, ReadConverters] = (
    weakref.WeakKeyDictionary()
)


def _connection() -> BaseDatabaseWrapper:
    return connections[DEFAULT_DB_ALIAS]


def _statements(connection: BaseDatabaseWrapper) -> _Sql:
    sql = _sql.get(connection.vendor)
    if sql is None:
        sql = _sql[connection.vendor] = _build(connection)
    return sql


def _build(connection: BaseDatabaseWrapper) -> _Sql:
    for field in (*_RUN_FIELDS, *_STEP_FIELDS):
        # The ORM would take such a field's placeholder from the field (an array, a
        # range, binary data): this SQL has a plain one for each, so a field whose
        # placeholder on this database is anything else may not sneak in.
        placeholder = getattr(field, "get_placeholder_sql", None)
        if placeholder is not None and placeholder(b"", None, connection) != ("%s", (b"",)):
            raise NotSupportedError(f"step_store writes {field} with a plain placeholder")
    qn = connection.ops.quote_name
    run_table = qn(Run._meta.db_table)
    version_table = qn(FlowVersion._meta.db_table)
    owner = f"{run_table}.{qn(_column(Run._meta.get_field('owner')))}"
    columns = [f"{run_table}.{qn(_column(f))}" for f in _RUN_FIELDS]
    columns += [f"{version_table}.{qn(_column(f))}" for f in _VERSION_FIELDS]
    read = (
        f"SELECT {', '.join(columns)} FROM {run_table} INNER JOIN {version_table} ON "
        f"({run_table}.{qn(_column(_FLOW_VERSION))} = "
        f"{version_table}.{qn(_column(FlowVersion._meta.pk))}) "
        f"WHERE {run_table}.{qn(_column(_PUBLIC_ID))} = %s"
        f" AND (%s OR {owner} = %s OR (%s AND {owner} NOT LIKE %s))"
    )
    if connection.features.has_select_for_update:
        # As select_for_update(of=("self",)): the run's row only, not its flow version's,
        # which every run of the flow shares. SQLite has no row locks: the IMMEDIATE
        # transaction already holds the database's write lock.
        if not connection.features.has_select_for_update_of:
            raise NotSupportedError(f"{connection.vendor} cannot lock the run's row alone")
        read += " " + connection.ops.for_update_sql(of=(run_table,))
    step_table = qn(Step._meta.db_table)
    into = f"INSERT INTO {step_table} ({', '.join(qn(_column(f)) for f in _STEP_FIELDS)})"
    marks = ", ".join(["%s"] * len(_STEP_FIELDS))
    returning = connection.features.can_return_columns_from_insert
    returned = f" RETURNING {step_table}.{qn(_column(Step._meta.pk))}" if returning else ""
    return _Sql(
        read=read,
        insert=f"{into} VALUES ({marks}){returned}",
        returning=returning,
        insert_from_update=(
            f"{into} SELECT {marks} FROM {qn(_UPDATED)}{returned}"
            if returning and connection.vendor == "postgresql"
            else None
        ),
    )


def _read_converters(connection: BaseDatabaseWrapper) -> ReadConverters:
    found = _converters.get(connection)
    if found is None:
        converters = []
        for i, field in enumerate((*_RUN_FIELDS, *_VERSION_FIELDS)):
            col = field.get_col(field.model._meta.db_table)
            convs = (*connection.ops.get_db_converters(col), *col.get_db_converters(connection))
            if convs:
                converters.append((i, tuple(convs), col))
        found = _converters[connection] = tuple(converters)
    return found


def run_locked(run_id: str, visible: Visibility) -> Run | None:
    """The run ``run_id``, read for a step inside the caller's transaction, locked (a row
    lock on PostgreSQL; SQLite's IMMEDIATE transaction holds the write lock); None when
    there is none, or none the caller may see (``visible``: such a row is neither read
    nor locked). One statement; every column of the run loaded, and its flow version's
    ``flow_id`` and ``content_hash``.

    Raises TransactionManagementError outside a transaction (a lock would end at once),
    as ``select_for_update`` does.
    """
    connection = _connection()
    if connection.features.has_select_for_update and connection.get_autocommit():
        raise TransactionManagementError("a run is read for a step inside a transaction only")
    sql = _statements(connection)
    public_id = _PUBLIC_ID.get_db_prep_value(run_id, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql.read, (public_id, *visible.params()))
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for i, convs, col in _read_converters(connection):
        for convert in convs:
            values[i] = convert(values[i], col, connection)
    n = len(_RUN_FIELDS)
    run = Run.from_db(connection.alias, _RUN_NAMES, values[:n])
    version = FlowVersion.from_db(
        connection.alias, _VERSION_NAMES, [run.flow_version_id, *values[n:]]
    )
    _FLOW_VERSION.set_cached_value(run, version)
    return run


def step_append(run: Run, step: Step, *, update: Sequence[str]) -> None:
    """Record a step: UPDATE the run's ``update`` columns (field names), and nothing else,
    as ``run.save(update_fields=update)`` does, then INSERT ``step`` and set its id, as
    ``step.save(force_insert=True)`` does. ``update`` is empty for a run the ORM has just
    inserted (guide_start). On PostgreSQL the two are one statement (ADR 0095).

    Raises ``Run.NotUpdated`` when the run's row was not there to update (and then
    inserts nothing).
    """
    if step.pk is not None or run.pk is None or step.run_id != run.pk:
        raise ValueError("step_append takes a saved run and a new step of it")
    connection = _connection()
    sql = _statements(connection)
    names = tuple(update)
    with connection.cursor() as cursor:
        run_update = _update(connection, run, names) if names else None
        params = [f.get_db_prep_save(f.pre_save(step, True), connection) for f in _STEP_FIELDS]
        if run_update is not None and sql.insert_from_update is not None:
            update_sql, update_params = run_update
            cursor.execute(
                _update_with_insert(connection, names, update_sql, sql.insert_from_update),
                [*update_params, *params],
            )
            row = cursor.fetchone()
            if row is None:  # the UPDATE found no row, so the INSERT took none from it
                raise Run.NotUpdated(_NOT_UPDATED)
            step_id = row[0]
        else:
            if run_update is not None:
                cursor.execute(*run_update)
                if cursor.rowcount < 1:
                    raise Run.NotUpdated(_NOT_UPDATED)
            cursor.execute(sql.insert, params)
            if sql.returning:
                row = cursor.fetchone()
                step_id = row[0] if row else None
            else:
                step_id = connection.ops.last_insert_id(
                    cursor, Step._meta.db_table, _column(Step._meta.pk)
                )
    if names:
        run._state.db = connection.alias
    step.pk = step_id
    step._state.adding = False
    step._state.db = connection.alias


def _update(
    connection: BaseDatabaseWrapper, run: Run, names: tuple[str, ...]
) -> tuple[str, list[Any]]:
    """The run's UPDATE of ``names`` and its parameters (the run's id last)."""
    key = (connection.vendor, names)
    update = _updates.get(key)
    if update is None:
        update = _updates[key] = _build_update(connection, names)
    sql, fields = update
    params = [f.get_db_prep_save(f.pre_save(run, False), connection) for f in fields]
    params.append(Run._meta.pk.get_db_prep_value(run.pk, connection))
    return sql, params


def _update_with_insert(
    connection: BaseDatabaseWrapper, names: tuple[str, ...], update_sql: str, insert: str
) -> str:
    """``update_sql`` (the UPDATE of ``names``) and ``insert`` (the step's INSERT selecting
    from it) as one statement: the UPDATE in a WITH clause returning the run's id, so the
    INSERT inserts nothing when the UPDATE finds no row. Its parameters are the UPDATE's,
    then the INSERT's; it returns the step's id."""
    key = (connection.vendor, names)
    found = _updates_with_insert.get(key)
    if found is None:
        qn = connection.ops.quote_name
        found = _updates_with_insert[key] = (
            f"WITH {qn(_UPDATED)} AS ({update_sql} RETURNING {qn(_column(Run._meta.pk))}) {insert}"
        )
    return found


def _build_update(
    connection: BaseDatabaseWrapper, names: tuple[str, ...]
) -> tuple[str, tuple[Field[Any, Any], ...]]:
    fields = tuple(cast("Field[Any, Any]", Run._meta.get_field(name)) for name in names)
    qn = connection.ops.quote_name
    sets = ", ".join(f"{qn(_column(f))} = %s" for f in fields)
    table = qn(Run._meta.db_table)
    sql = f"UPDATE {table} SET {sets} WHERE {table}.{qn(_column(Run._meta.pk))} = %s"
    return sql, fields
