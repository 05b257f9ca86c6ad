#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "nearsim.h"

/*
 * DROP EXTENSION nearsim while tables are enabled.  Each enabled table has
 * triggers, rotation indexes and search functions that call the extension's
 * functions, and PostgreSQL does not record most of those uses: without this
 * check the extension would go and leave triggers behind that fail on every
 * write.  So a plain DROP EXTENSION is refused with the list of enabled
 * tables, and DROP EXTENSION ... CASCADE first disables each of them (their
 * documents and fingerprint columns stay), then proceeds.
 */

PG_FUNCTION_INFO_V1(nearsim_drop_extension);

/* True if the DROP statement names the extension nearsim */
static bool
drops_nearsim(DropStmt *stmt)
{
	ListCell   *cell;

	if (stmt->removeType != OBJECT_EXTENSION)
		return false;
	foreach(cell, stmt->objects)
	{
		if (strcmp(strVal(lfirst(cell)), NEARSIM_EXTENSION) == 0)
			return true;
	}
	return false;
}

/* Event trigger (ddl_command_start, DROP EXTENSION): refuse, or disable the enabled tables */
Datum
nearsim_drop_extension(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigger;
	DropStmt   *stmt;
	Oid			extension;
	char	   *schema;
	StringInfoData query;
	StringInfoData tables;
	uint64		count;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("nearsim_drop_extension() is an event trigger function")));
	trigger = (EventTriggerData *) fcinfo->context;
	if (!IsA(trigger->parsetree, DropStmt))
		PG_RETURN_VOID();
	stmt = (DropStmt *) trigger->parsetree;
	if (!drops_nearsim(stmt))
		PG_RETURN_VOID();
	extension = get_extension_oid(NEARSIM_EXTENSION, true);
	if (!OidIsValid(extension))
		PG_RETURN_VOID();

	schema = nearsim_extension_schema();
	SPI_connect();
	initStringInfo(&query);
	/* Rows of tables dropped since are removed by the sql_drop trigger; skip them anyway */
	appendStringInfo(&query,
					 "SELECT r.tbl::pg_catalog.oid::pg_catalog.regclass::pg_catalog.text"
					 " FROM %s." NEARSIM_REGISTRY " r"
					 " WHERE EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = r.tbl)"
					 " ORDER BY 1",
					 quote_identifier(schema));
	if (SPI_execute(query.data, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "nearsim: could not read the enabled tables");
	count = SPI_processed;
	if (count > 0 && stmt->behavior != DROP_CASCADE)
	{
		initStringInfo(&tables);
		for (uint64 i = 0; i < count && i < 10; i++)
			appendStringInfo(&tables, "%s%s", i > 0 ? ", " : "",
							 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		if (count > 10)
			appendStringInfoString(&tables, ", ...");
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg_plural("cannot drop extension nearsim because %d table is enabled for it",
							   "cannot drop extension nearsim because %d tables are enabled for it",
							   (unsigned long) count, (int) count),
				 errdetail("Enabled: %s.", tables.data),
				 errhint("Run SELECT nearsim_disable(table) for each, or DROP EXTENSION nearsim CASCADE to remove their triggers, rotation indexes and search functions with it; the documents and their fingerprint columns stay.")));
	}
	if (count > 0)
	{
		SPITupleTable *enabled = SPI_tuptable;

		for (uint64 i = 0; i < count; i++)
		{
			char	   *table = SPI_getvalue(enabled->vals[i], enabled->tupdesc, 1);

			resetStringInfo(&query);
			appendStringInfo(&query, "SELECT %s.nearsim_disable(%s::pg_catalog.regclass)",
							 quote_identifier(schema), quote_literal_cstr(table));
			if (SPI_execute(query.data, false, 0) != SPI_OK_SELECT)
				elog(ERROR, "nearsim: could not disable table %s", table);
			ereport(NOTICE,
					(errmsg("nearsim: disabled table %s before dropping the extension", table)));
		}
	}
	SPI_finish();
	PG_RETURN_VOID();
}
