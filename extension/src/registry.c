#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "nearsim.h"

/*
 * The registry of enabled tables, nearsim_tables, grants no role the right
 * to write it.  These functions write it for a caller that has the
 * privileges of the table's owner; the schema of the objects is the table's
 * own, and the registry's trigger links the objects to the table
 * (nearsim_link), which refuses any that are not the owner's.  So a row can
 * name nothing but the owner's objects next to the owner's table.
 */

/*
 * The name of the schema the extension is installed in, read from
 * pg_extension by the extension's OID (PostgreSQL 15 has no public function
 * for it); every search reads the registry, and a query for the name,
 * parsed and planned each time, took a quarter of a search that finds
 * nothing.
 */
char *
nearsim_extension_schema(void)
{
	Oid			extension = get_extension_oid(NEARSIM_EXTENSION, false);
	Relation	catalog = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			schema = InvalidOid;
	char	   *name;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extension));
	scan = systable_beginscan(catalog, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		schema = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(catalog, AccessShareLock);
	name = OidIsValid(schema) ? get_namespace_name(schema) : NULL;
	if (name == NULL)
		elog(ERROR, "nearsim: could not find the extension's schema");
	return name;
}

/* The registry, schema-qualified and quoted */
char *
nearsim_registry_name(void)
{
	return psprintf("%s.%s", quote_identifier(nearsim_extension_schema()), NEARSIM_REGISTRY);
}

/*
 * The registry row of table relid, read with the caller's rights (inside
 * SPI; anyone may read the registry); false when it is not enabled.
 */
bool
nearsim_read_registration(Oid relid, NearsimRegistration *reg)
{
	char	   *statement = psprintf("SELECT r.key_column, r.text_column, r.hash_column,"
									 " r.profile, r.bucket_table"
									 " FROM %s r WHERE r.tbl OPERATOR(pg_catalog.=) $1",
									 nearsim_registry_name());
	Oid			types[1] = {REGCLASSOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	HeapTuple	row;
	TupleDesc	desc;

	if (SPI_execute_with_args(statement, 1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "nearsim: could not read the registry");
	if (SPI_processed != 1)
		return false;
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	reg->key_column = SPI_getvalue(row, desc, 1);
	reg->text_column = SPI_getvalue(row, desc, 2);
	reg->hash_column = SPI_getvalue(row, desc, 3);
	reg->profile = SPI_getvalue(row, desc, 4);
	reg->bucket_table = SPI_getvalue(row, desc, 5);
	return true;
}

/* Run a fixed statement on the registry with the rights of a superuser */
static void
write_registry(const char *statement, int nargs, Oid *types, Datum *values, const char *nulls)
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (SPI_execute_with_args(statement, nargs, types, values, nulls, false, 0) < 0)
		elog(ERROR, "nearsim: could not write the registry");
	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

/* The arguments of nearsim_register that may be NULL */
#define BUCKET_TABLE_ARG 6
#define BUCKET_FUNCTION_ARG 8

PG_FUNCTION_INFO_V1(nearsim_register);
/*
 * Record an enabled table, or its new layout or profile; the objects are
 * linked to the table by the registry's trigger.
 */
Datum
nearsim_register(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Oid			types[10] = {OIDOID, NAMEOID, NAMEOID, NAMEOID, INT4OID, TEXTOID,
	NAMEOID, NAMEOID, NAMEOID, NAMEOID};
	Datum		values[10];
	char		nulls[10];
	StringInfoData statement;

	/* a bucket table and its function are only those of a table enabled before 0.4.0 */
	for (int i = 0; i < 10; i++)
		if (PG_ARGISNULL(i) && i != BUCKET_TABLE_ARG && i != BUCKET_FUNCTION_ARG)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("nearsim_register needs every argument but bucket_table and bucket_function")));
	nearsim_check_owner_rights(nearsim_relation_owner(relid), relid);
	for (int i = 0; i < 10; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}

	SPI_connect();
	initStringInfo(&statement);
	appendStringInfo(&statement,
					 "INSERT INTO %s AS r (tbl, key_column, text_column, hash_column, bands,"
					 " profile, object_schema, bucket_table, fingerprint_function,"
					 " bucket_function, similar_function)"
					 " SELECT c.oid::pg_catalog.regclass, $2, $3, $4, $5, $6, n.nspname, $7, $8,"
					 " $9, $10 FROM pg_catalog.pg_class c"
					 " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
					 " WHERE c.oid = $1"
					 " ON CONFLICT (tbl) DO UPDATE SET key_column = EXCLUDED.key_column,"
					 " text_column = EXCLUDED.text_column, hash_column = EXCLUDED.hash_column,"
					 " bands = EXCLUDED.bands, profile = EXCLUDED.profile,"
					 " object_schema = EXCLUDED.object_schema,"
					 " bucket_table = EXCLUDED.bucket_table,"
					 " fingerprint_function = EXCLUDED.fingerprint_function,"
					 " bucket_function = EXCLUDED.bucket_function,"
					 " similar_function = EXCLUDED.similar_function",
					 nearsim_registry_name());
	write_registry(statement.data, 10, types, values, nulls);
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(nearsim_unregister);
/*
 * Forget a table: its owner (or a role with the owner's privileges) may, and
 * anybody may forget a table that no longer exists.
 */
Datum
nearsim_unregister(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		nearsim_check_owner_rights(nearsim_relation_owner(relid), relid);
	SPI_connect();
	write_registry(psprintf("DELETE FROM %s WHERE tbl::pg_catalog.oid = $1", nearsim_registry_name()),
				   1, types, values, NULL);
	SPI_finish();
	PG_RETURN_VOID();
}

/* The registry row of table relid (inside SPI); an error naming it when it is not enabled */
void
nearsim_require_registration(Oid relid, NearsimRegistration *reg)
{
	if (!nearsim_read_registration(relid, reg))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s is not enabled for nearsim",
						DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(relid)))),
				 errhint("Run SELECT nearsim_enable(table, text_column).")));
}

/*
 * The arguments after the table of nearsim_resemblance_pairs for enabled
 * table relid: its key, text and fingerprint columns as names, in the
 * caller's memory (inside SPI), and the tokenisation of its profile; false
 * when it is not enabled
 */
bool
nearsim_join_columns(Oid relid, NameData *columns, int *tokenisation)
{
	NearsimRegistration reg;

	if (!nearsim_read_registration(relid, &reg))
		return false;
	namestrcpy(&columns[0], reg.key_column);
	namestrcpy(&columns[1], reg.text_column);
	namestrcpy(&columns[2], reg.hash_column);
	*tokenisation = nearsim_profile_tokenisation(reg.profile);
	if (*tokenisation == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the texts of %s are measured with the words of its profile %s,"
						" which this server does not compute",
						DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(relid))),
						reg.profile),
				 errhint("Recompute its fingerprints with another profile: SELECT nearsim_rebuild(table, profile => 'default/1').")));
	return true;
}
