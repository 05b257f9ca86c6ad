#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "nearsim.h"

/*
 * Schema changes of an enabled table that would break what nearsim made for
 * it are refused before they happen, with a hint: renaming the table or
 * moving it to another schema (its search functions name it), renaming,
 * dropping or retyping the key, text or fingerprint column, and dropping the
 * primary key.  Everything else (new columns, other columns, indexes,
 * ownership, which nearsim_follow_owner follows) goes through.
 */

/* The registered columns of relid: key, text, fingerprint; false if not enabled */
static bool
registered_columns(Oid relid, char **columns)
{
	StringInfoData query;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		found;

	initStringInfo(&query);
	appendStringInfo(&query,
					 "SELECT key_column::pg_catalog.text, text_column::pg_catalog.text,"
					 " hash_column::pg_catalog.text FROM %s"
					 " WHERE tbl::pg_catalog.oid OPERATOR(pg_catalog.=) $1",
					 nearsim_registry_name());
	if (SPI_execute_with_args(query.data, 1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "nearsim: could not read the registry");
	found = SPI_processed == 1;
	for (int i = 0; found && i < 3; i++)
		columns[i] = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1);
	return found;
}

/* Errors out: the change would break nearsim's objects for the table */
static void
refuse(Oid relid, const char *what)
{
	char	   *table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												   get_rel_name(relid));

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot %s: table %s is enabled for nearsim", what, table),
			 errhint("Run SELECT nearsim_disable('%s') first, then nearsim_enable after the change.",
					 table)));
}

/* Index of column in the registered columns, or -1 */
static int
registered(char **columns, const char *column)
{
	for (int i = 0; i < 3; i++)
		if (column != NULL && strcmp(columns[i], column) == 0)
			return i;
	return -1;
}

/* True if constraint name of relid is its primary key */
static bool
is_primary_key(Oid relid, const char *name)
{
	Oid			types[2] = {OIDOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(relid), CStringGetTextDatum(name)};

	if (SPI_execute_with_args("SELECT FROM pg_catalog.pg_constraint"
							  " WHERE conrelid OPERATOR(pg_catalog.=) $1"
							  " AND conname OPERATOR(pg_catalog.=) $2::pg_catalog.name"
							  " AND contype OPERATOR(pg_catalog.=) 'p'",
							  2, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "nearsim: could not read the constraints");
	return SPI_processed > 0;
}

static const char *const column_roles[3] = {"key", "text", "fingerprint"};

/* Checks one statement against the registered table it changes, if any */
static void
check_statement(Node *tree)
{
	RangeVar   *relation = NULL;
	Oid			relid;
	char	   *columns[3];

	if (IsA(tree, RenameStmt))
	{
		RenameStmt *stmt = (RenameStmt *) tree;

		if (stmt->renameType == OBJECT_TABLE ||
			(stmt->renameType == OBJECT_COLUMN && stmt->relationType == OBJECT_TABLE))
			relation = stmt->relation;
	}
	else if (IsA(tree, AlterObjectSchemaStmt))
	{
		if (((AlterObjectSchemaStmt *) tree)->objectType == OBJECT_TABLE)
			relation = ((AlterObjectSchemaStmt *) tree)->relation;
	}
	else if (IsA(tree, AlterTableStmt))
		relation = ((AlterTableStmt *) tree)->relation;
	if (relation == NULL)
		return;
	relid = RangeVarGetRelid(relation, NoLock, true);
	if (!OidIsValid(relid) || !registered_columns(relid, columns))
		return;

	if (IsA(tree, RenameStmt))
	{
		RenameStmt *stmt = (RenameStmt *) tree;
		int			which = registered(columns, stmt->subname);

		if (stmt->renameType == OBJECT_TABLE)
			refuse(relid, "rename the table");
		else if (which >= 0)
			refuse(relid, psprintf("rename the %s column %s", column_roles[which],
								   quote_identifier(stmt->subname)));
	}
	else if (IsA(tree, AlterObjectSchemaStmt))
		refuse(relid, "move the table to another schema");
	else
	{
		ListCell   *cell;

		foreach(cell, ((AlterTableStmt *) tree)->cmds)
		{
			AlterTableCmd *cmd = (AlterTableCmd *) lfirst(cell);
			int			which = registered(columns, cmd->name);

			if (cmd->subtype == AT_AlterColumnType && which >= 0)
				refuse(relid, psprintf("change the type of the %s column %s",
									   column_roles[which], quote_identifier(cmd->name)));
			if (cmd->subtype == AT_DropColumn && which >= 0)
				refuse(relid, psprintf("drop the %s column %s", column_roles[which],
									   quote_identifier(cmd->name)));
			if (cmd->subtype == AT_DropConstraint && is_primary_key(relid, cmd->name))
				refuse(relid, "drop the primary key");
			if (cmd->subtype == AT_SetLogged || cmd->subtype == AT_SetUnLogged)
				refuse(relid, "change whether the table is logged");
		}
	}
}

PG_FUNCTION_INFO_V1(nearsim_guard_alter_table);
/* Event trigger on ALTER TABLE: refuses changes that would break an enabled table */
Datum
nearsim_guard_alter_table(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("nearsim_guard_alter_table() is an event trigger function")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	check_statement(((EventTriggerData *) fcinfo->context)->parsetree);
	SPI_finish();
	PG_RETURN_VOID();
}
