#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/dependency.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "nearsim.h"

/*
 * Work on a table's rows as the table's owner, the way PostgreSQL's own
 * maintenance commands do it (REFRESH MATERIALIZED VIEW, VACUUM, REINDEX):
 * the user id becomes the owner inside a security-restricted operation with
 * search_path pinned.  The table's triggers, index expressions and casts run
 * with the owner's rights, and cannot climb back to the caller's: inside a
 * security-restricted operation SET ROLE, SET SESSION AUTHORIZATION and
 * temporary objects are refused.  An error unwinds the user id and the
 * settings with the (sub)transaction.
 */

/* Owner of relation relid; an error if there is none */
Oid
nearsim_relation_owner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/* Errors out unless the current user has the privileges of owner, relid's owner */
void
nearsim_check_owner_rights(Oid owner, Oid relid)
{
	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", get_rel_name(relid)),
				 errdetail("Table %s is owned by %s.", get_rel_name(relid),
						   GetUserNameFromId(owner, false))));
}

/* Act as owner inside a security-restricted operation, search_path pinned */
void
nearsim_begin_as_owner(Oid owner, NearsimOwnerState *saved)
{
	GetUserIdAndSecContext(&saved->userid, &saved->sec_context);
	SetUserIdAndSecContext(owner, saved->sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	saved->nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

/* Back to the user and settings nearsim_begin_as_owner saved */
void
nearsim_end_as_owner(const NearsimOwnerState *saved)
{
	AtEOXact_GUC(false, saved->nestlevel);
	SetUserIdAndSecContext(saved->userid, saved->sec_context);
}

PG_FUNCTION_INFO_V1(nearsim_as_owner);
/*
 * Run one statement as the owner of a table, security-restricted; the first
 * column of its first row as text (NULL without rows).  Only a role that has
 * the owner's privileges already may call it.
 */
Datum
nearsim_as_owner(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *statement = text_to_cstring(PG_GETARG_TEXT_PP(1));
	Oid			owner = nearsim_relation_owner(relid);
	NearsimOwnerState saved;
	text	   *result = NULL;

	nearsim_check_owner_rights(owner, relid);

	nearsim_begin_as_owner(owner, &saved);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	if (SPI_execute(statement, false, 0) < 0)
		elog(ERROR, "nearsim: could not run a statement as the owner of %s", get_rel_name(relid));
	if (SPI_tuptable != NULL && SPI_processed > 0)
	{
		char	   *value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		/* copied into the caller's memory context: it outlives SPI_finish */
		if (value != NULL)
			result = (text *) DatumGetPointer(SPI_datumTransfer(CStringGetTextDatum(value),
																 false, -1));
	}
	SPI_finish();

	nearsim_end_as_owner(&saved);

	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(result);
}

/* Owner and schema of a relation (classid pg_class) or function (pg_proc) */
static void
object_owner_and_schema(Oid classid, Oid objid, Oid *owner, Oid *schema)
{
	HeapTuple	tuple;

	if (classid == RelationRelationId)
	{
		tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(objid));
		if (!HeapTupleIsValid(tuple))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("relation with OID %u does not exist", objid)));
		*owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
		*schema = ((Form_pg_class) GETSTRUCT(tuple))->relnamespace;
	}
	else
	{
		tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(objid));
		if (!HeapTupleIsValid(tuple))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("function with OID %u does not exist", objid)));
		*owner = ((Form_pg_proc) GETSTRUCT(tuple))->proowner;
		*schema = ((Form_pg_proc) GETSTRUCT(tuple))->pronamespace;
	}
	ReleaseSysCache(tuple);
}

/* Make one object depend on the table, after checking it may */
static void
link_object(Oid classid, Oid objid, Oid relid, Oid table_owner, Oid table_schema)
{
	ObjectAddress dependent;
	ObjectAddress referenced;
	Oid			owner;
	Oid			schema;

	object_owner_and_schema(classid, objid, &owner, &schema);
	if (owner != table_owner || schema != table_schema)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s is not an object of table %s",
						getObjectDescriptionOids(classid, objid), get_rel_name(relid)),
				 errdetail("nearsim's objects for a table are in its schema and belong to its owner.")));
	ObjectAddressSet(dependent, classid, objid);
	ObjectAddressSet(referenced, RelationRelationId, relid);
	deleteDependencyRecordsForSpecific(classid, objid, DEPENDENCY_NORMAL,
									   RelationRelationId, relid);
	recordDependencyOn(&dependent, &referenced, DEPENDENCY_NORMAL);
}

PG_FUNCTION_INFO_V1(nearsim_link);
/*
 * Record that nearsim's objects for a table (its trigger and search
 * functions; a bucket table made before 0.4.0) depend on the table, so that dropping the table
 * drops them through PostgreSQL's dependencies, never by name.  Each object
 * must be in the table's schema and belong to the table's owner, and the
 * caller must have the owner's privileges.
 */
Datum
nearsim_link(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	ArrayType  *relations = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *functions = PG_GETARG_ARRAYTYPE_P(2);
	Oid			owner = nearsim_relation_owner(relid);
	Oid			schema = get_rel_namespace(relid);
	Datum	   *items;
	bool	   *nulls;
	int			count;

	nearsim_check_owner_rights(owner, relid);

	deconstruct_array(relations, REGCLASSOID, sizeof(Oid), true, TYPALIGN_INT,
					  &items, &nulls, &count);
	for (int i = 0; i < count; i++)
		if (!nulls[i])
			link_object(RelationRelationId, DatumGetObjectId(items[i]), relid, owner, schema);
	deconstruct_array(functions, REGPROCEDUREOID, sizeof(Oid), true, TYPALIGN_INT,
					  &items, &nulls, &count);
	for (int i = 0; i < count; i++)
		if (!nulls[i])
			link_object(ProcedureRelationId, DatumGetObjectId(items[i]), relid, owner, schema);
	PG_RETURN_VOID();
}
