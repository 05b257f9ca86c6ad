#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "storage/lmgr.h"
#include "utils/rls.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "port/pg_bitutils.h"

#include "nearsim.h"
#include "rotation.h"

/*
 * The check-in guard (nearsim_guard): a BEFORE ROW trigger that looks for a
 * near-duplicate of the incoming document among those already in the table
 * and, when it finds one, refuses the row (error), drops it (skip) or writes
 * it and records the link (record).
 *
 * Two sessions that check in near-duplicates of each other at the same
 * moment must not both pass, as with an exclusion constraint.  The guard
 * takes a transaction-level lock before it looks, so guarded writers of one
 * table check one after the other, each seeing what the previous one
 * committed.  The lock is SHARE UPDATE EXCLUSIVE on the table's primary key
 * index: it conflicts with itself, not with the ROW EXCLUSIVE and ACCESS
 * SHARE locks of writers, readers and VACUUM, and no role can take it but
 * through the guard (LOCK TABLE refuses indexes; what else takes it,
 * REINDEX and ALTER INDEX, is the owner's), where an advisory lock would
 * let any role stop every guarded writer: at READ COMMITTED each query takes a new
 * snapshot, after the lock.  At REPEATABLE READ and SERIALIZABLE the
 * transaction's snapshot is older than the lock; a near-duplicate committed
 * since then is looked for again with the latest snapshot, and if there is
 * one the row fails with a serialization failure (40001) to be retried, as
 * PostgreSQL does for a concurrent update.
 *
 * The search runs as the table's owner (whose table it is, whichever role
 * writes), inside a security-restricted operation with search_path pinned.
 */

#define GUARD_ARGS 9
#define ERRCODE_NEAR_DUPLICATE MAKE_SQLSTATE('2', '3', 'N', '0', '1')

/* What a trigger was made with (its arguments, from nearsim_guard) */
typedef struct Guard
{
	const char *key_column;
	const char *text_column;
	const char *hash_column;
	int32		max_distance;	/* the search radius, also of a verified guard */
	double		min_similarity; /* NaN: by bits only */
	const char *measure;
	const char *action;			/* error, skip or record */
	const char *links;			/* qualified table of record, or "" */
	const char *profile;
} Guard;

/* An existing document near the incoming one */
typedef struct NearDuplicate
{
	char	   *key;
	int32		distance;
	double		similarity;		/* NaN: not measured */
} NearDuplicate;

static Guard
guard_of(Trigger *trigger)
{
	Guard		guard;

	if (trigger->tgnargs != GUARD_ARGS)
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
				 errmsg("trigger %s was not made by nearsim_guard", trigger->tgname),
				 errhint("SELECT nearsim_guard(table, ...) makes it.")));
	guard.key_column = trigger->tgargs[0];
	guard.text_column = trigger->tgargs[1];
	guard.hash_column = trigger->tgargs[2];
	guard.max_distance = (int32) strtol(trigger->tgargs[3], NULL, 10);
	guard.min_similarity = trigger->tgargs[4][0] == '\0' ? NAN : strtod(trigger->tgargs[4], NULL);
	guard.measure = trigger->tgargs[5];
	guard.action = trigger->tgargs[6];
	guard.links = trigger->tgargs[7];
	guard.profile = trigger->tgargs[8];
	return guard;
}

/* nearsim.guard: off lets the table's owner check documents in past the guard */
static bool guard_on = true;

/* Takes the check-in lock of a table: see above */
static void
lock_check_in(Relation rel)
{
	Oid			primary_key = RelationGetPrimaryKeyIndex(rel);

	if (!OidIsValid(primary_key))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s has no primary key for the nearsim guard to lock",
						RelationGetRelationName(rel))));
	LockRelationOid(primary_key, ShareUpdateExclusiveLock);
}

/*
 * Whether the writer may be told which document is near its own, as
 * PostgreSQL tells the key of a unique violation (BuildIndexValueDescription):
 * only with the right to read the key, text and fingerprint columns, and
 * under row-level security only when the writer's own query of the table
 * finds that row.
 */
static bool
writer_may_see(Relation rel, Oid writer, const Guard *guard, const char *key)
{
	Oid			relid = RelationGetRelid(rel);
	const char *columns[3] = {guard->key_column, guard->text_column, guard->hash_column};
	AttrNumber	key_attnum = get_attnum(relid, guard->key_column);
	Oid			key_type;
	Oid			input;
	Oid			input_param;
	Datum		value;
	char	   *query;
	bool		seen;

	if (pg_class_aclcheck(relid, writer, ACL_SELECT) != ACLCHECK_OK)
	{
		for (int i = 0; i < 3; i++)
		{
			AttrNumber	attnum = get_attnum(relid, columns[i]);

			if (attnum == InvalidAttrNumber ||
				pg_attribute_aclcheck(relid, attnum, writer, ACL_SELECT) != ACLCHECK_OK)
				return false;
		}
	}
	if (check_enable_rls(relid, writer, true) != RLS_ENABLED)
		return true;
	/* the writer's own query, under the table's policies */
	if (key_attnum == InvalidAttrNumber)
		return false;
	key_type = get_atttype(relid, key_attnum);
	getTypeInputInfo(key_type, &input, &input_param);
	value = OidInputFunctionCall(input, (char *) key, input_param, -1);
	query = psprintf("SELECT 1 FROM ONLY %s AS d WHERE d.%s OPERATOR(pg_catalog.=) $1",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)),
					 quote_identifier(guard->key_column));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	if (SPI_execute_with_args(query, 1, &key_type, &value, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "nearsim: the guard could not check what the writer may see");
	seen = SPI_processed > 0;
	SPI_finish();
	return seen;
}

/* The value of column name of tuple as text, or NULL */
static char *
column_text(HeapTuple tuple, TupleDesc tupdesc, const char *name)
{
	int			attnum = SPI_fnumber(tupdesc, name);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column %s named by the nearsim guard does not exist", name),
				 errhint("SELECT nearsim_guard(table, ...) makes the guard again.")));
	return SPI_getvalue(tuple, tupdesc, attnum);
}

/*
 * The nearest existing document within the guard's radius (verified: the
 * most similar of those at least min_similarity similar), other than the
 * row itself; false if none.  Under the snapshot the query takes: a new one
 * at READ COMMITTED, the transaction's otherwise.
 */
/* The parameters of a search around fingerprint, the row's own keys left out */
typedef struct GuardSearch
{
	Oid			types[6];
	Datum		values[6];
	char		nulls[6];
} GuardSearch;

/*
 * $1 fingerprint, $2 table, $3 fingerprint column, $4 radius, $5 and $6 the
 * row's new and old keys as text (NULL when there is none).
 */
static GuardSearch
search_parameters(const Guard *guard, Relation rel, int64 fingerprint, const char *new_key,
				  const char *old_key)
{
	GuardSearch search = {
		{INT8OID, REGCLASSOID, NAMEOID, INT4OID, TEXTOID, TEXTOID},
		{Int64GetDatum(fingerprint), ObjectIdGetDatum(RelationGetRelid(rel)),
		 CStringGetDatum(guard->hash_column), Int32GetDatum(guard->max_distance),
		 new_key ? CStringGetTextDatum(new_key) : (Datum) 0,
		 old_key ? CStringGetTextDatum(old_key) : (Datum) 0},
		{' ', ' ', ' ', ' ', new_key ? ' ' : 'n', old_key ? ' ' : 'n'},
	};

	return search;
}

/* The documents within the guard's radius, the row itself left out: FROM and WHERE */
static char *
within_radius(const Guard *guard, const char *ext, Relation rel)
{
	const char *key = quote_identifier(guard->key_column);

	return psprintf("FROM ONLY %s AS d"
					" WHERE d.ctid OPERATOR(pg_catalog.=) ANY (%s.nearsim_search($2, $3, $1, $4))"
					" AND %s.hamming(d.%s, $1) OPERATOR(pg_catalog.<=) $4"
					" AND d.%s::pg_catalog.text IS DISTINCT FROM $5"
					" AND d.%s::pg_catalog.text IS DISTINCT FROM $6",
					quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											   RelationGetRelationName(rel)),
					ext, ext, quote_identifier(guard->hash_column), key, key);
}

/*
 * The guard's search by bits alone, read from the table's rotation index
 * in this backend, as a new statement would read it: a new snapshot at
 * READ COMMITTED (the transaction's otherwise) that sees the rows this
 * statement wrote before.  Equal to the SQL of within_radius, without
 * planning a statement for each row; only the keys of the rows found are
 * made text, as the table's owner (their output function is the owner's).
 */
static bool
find_near_by_index(const Guard *guard, Relation rel, int64 fingerprint, const char *new_key,
				   const char *old_key, Oid owner, NearDuplicate *found)
{
	AttrNumber	hash_attnum = get_attnum(RelationGetRelid(rel), guard->hash_column);
	AttrNumber	key_attnum = get_attnum(RelationGetRelid(rel), guard->key_column);
	RotationBand bands[MAX_BANDS];
	int			count;
	RotationSearch *search;
	TupleTableSlot *slot;
	int			distance;
	NearDuplicate best = {NULL, FINGERPRINT_BITS + 1, NAN};	/* none yet */
	Oid			output;
	bool		varlena;

	if (hash_attnum == InvalidAttrNumber || key_attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("a column named by the nearsim guard of %s does not exist",
						RelationGetRelationName(rel)),
				 errhint("SELECT nearsim_guard(table, ...) makes the guard again.")));
	getTypeOutputInfo(get_atttype(RelationGetRelid(rel), key_attnum), &output, &varlena);
	count = nearsim_find_bands(rel, hash_attnum, bands);

	PushActiveSnapshot(GetTransactionSnapshot());
	CommandCounterIncrement();
	UpdateActiveSnapshotCommandId();
	slot = table_slot_create(rel, NULL);
	search = nearsim_search_begin(rel, bands, count, GetActiveSnapshot());
	nearsim_search_radius(search, (uint64) fingerprint, guard->max_distance);
	while (nearsim_search_next(search, slot, &distance))
	{
		bool		isnull;
		Datum		hash = slot_getattr(slot, hash_attnum, &isnull);
		Datum		key;
		char	   *key_text = NULL;

		/* checked on the row, as the statement's WHERE does */
		if (isnull)
			continue;
		distance = pg_popcount64((uint64) DatumGetInt64(hash) ^ (uint64) fingerprint);
		if (distance > guard->max_distance)
			continue;
		key = slot_getattr(slot, key_attnum, &isnull);
		if (!isnull)
		{
			NearsimOwnerState saved;

			nearsim_begin_as_owner(owner, &saved);
			key_text = OidOutputFunctionCall(output, key);
			nearsim_end_as_owner(&saved);
		}
		if (nearsim_same_key(key_text, new_key) || nearsim_same_key(key_text, old_key))
			continue;
		if (nearsim_nearer(distance, key_text, best.distance, best.key))
		{
			best.key = key_text;
			best.distance = distance;
		}
	}
	nearsim_search_end(search);
	ExecDropSingleTupleTableSlot(slot);
	PopActiveSnapshot();
	if (best.distance > guard->max_distance)
		return false;
	*found = best;
	return true;
}

/*
 * The nearest existing document within the guard's radius (verified: the
 * most similar of those at least min_similarity similar), other than the
 * row itself; false if none.  Under the snapshot the query takes: a new one
 * at READ COMMITTED, the transaction's otherwise.
 */
static bool
find_near_duplicate(const Guard *guard, const char *schema, Relation rel, int64 fingerprint,
					const char *text, const char *new_key, const char *old_key,
					NearDuplicate *found)
{
	const char *ext = quote_identifier(schema);
	GuardSearch search = search_parameters(guard, rel, fingerprint, new_key, old_key);
	char	   *query;
	bool		isnull;

	if (isnan(guard->min_similarity))
	{
		query = psprintf("SELECT d.%s::pg_catalog.text, %s.hamming(d.%s, $1),"
						 " NULL::pg_catalog.float8 %s ORDER BY 2, 1 LIMIT 1",
						 quote_identifier(guard->key_column), ext,
						 quote_identifier(guard->hash_column), within_radius(guard, ext, rel));
		if (SPI_execute_with_args(query, 6, search.types, search.values, search.nulls, false,
								  1) != SPI_OK_SELECT)
			elog(ERROR, "nearsim: the guard's search failed");
	}
	else
	{
		Oid			vtypes[7] = {REGCLASSOID, TEXTOID, FLOAT8OID, TEXTOID, INT4OID, TEXTOID, TEXTOID};
		Datum		vvalues[7] = {search.values[1], text ? CStringGetTextDatum(text) : (Datum) 0,
			Float8GetDatum(guard->min_similarity), CStringGetTextDatum(guard->measure),
		search.values[3], search.values[4], search.values[5]};
		char		vnulls[7] = {' ', text ? ' ' : 'n', ' ', ' ', ' ', search.nulls[4],
		search.nulls[5]};

		query = psprintf("SELECT v.key, v.distance, v.similarity"
						 " FROM %s.nearsim_similar_verified($1, $2, $3, $4, $5) AS v"
						 " WHERE v.key IS DISTINCT FROM $6 AND v.key IS DISTINCT FROM $7"
						 " ORDER BY v.similarity DESC, v.distance, v.key LIMIT 1", ext);
		if (SPI_execute_with_args(query, 7, vtypes, vvalues, vnulls, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "nearsim: the guard's verified search failed");
	}
	if (SPI_processed == 0)
		return false;
	found->key = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	found->distance = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												  2, &isnull));
	{
		Datum		similarity = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3,
											   &isnull);

		found->similarity = isnull ? NAN : DatumGetFloat8(similarity);
	}
	return true;
}

/*
 * Keys of the documents within the guard's radius (other than the row
 * itself) under a new snapshot (latest) or the transaction's: for comparing
 * what the two see.
 */
static List *
keys_within(const Guard *guard, const char *schema, Relation rel, int64 fingerprint,
			const char *new_key, const char *old_key, bool latest)
{
	const char *ext = quote_identifier(schema);
	GuardSearch search = search_parameters(guard, rel, fingerprint, new_key, old_key);
	char	   *query = psprintf("SELECT d.%s::pg_catalog.text %s",
								 quote_identifier(guard->key_column),
								 within_radius(guard, ext, rel));
	List	   *keys = NIL;

	if (latest)
		PushActiveSnapshot(GetLatestSnapshot());
	if (SPI_execute_with_args(query, 6, search.types, search.values, search.nulls, latest,
							  0) != SPI_OK_SELECT)
		elog(ERROR, "nearsim: the guard's search failed");
	if (latest)
		PopActiveSnapshot();
	for (uint64 i = 0; i < SPI_processed; i++)
		keys = lappend(keys, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	return keys;
}

/* Record the link of a near-duplicate written anyway */
static void
record_link(const Guard *guard, const char *new_key, const NearDuplicate *found)
{
	Oid			types[2] = {INT4OID, FLOAT8OID};
	Datum		values[2];
	char		nulls[2] = {' ', isnan(found->similarity) ? 'n' : ' '};
	/* the keys as literals, which take the type of the key columns */
	char	   *query = psprintf("INSERT INTO %s (new_key, existing_key, distance, similarity)"
								 " VALUES (%s, %s, $1, $2)", guard->links,
								 quote_literal_cstr(new_key), quote_literal_cstr(found->key));

	values[0] = Int32GetDatum(found->distance);
	values[1] = Float8GetDatum(isnan(found->similarity) ? 0 : found->similarity);
	if (SPI_execute_with_args(query, 2, types, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "nearsim: could not record the near-duplicate in %s", guard->links);
}

/* Whether a list of keys includes key */
static bool
listed(List *keys, const char *key)
{
	ListCell   *cell;

	foreach(cell, keys)
		if (strcmp((const char *) lfirst(cell), key) == 0)
			return true;
	return false;
}

PG_FUNCTION_INFO_V1(nearsim_guard_check);
/*
 * The check-in guard's trigger (BEFORE INSERT OR UPDATE, FOR EACH ROW, made
 * by nearsim_guard): refuse, skip or record a document that has a
 * near-duplicate already in the table.
 */
Datum
nearsim_guard_check(PG_FUNCTION_ARGS)
{
	TriggerData *data = (TriggerData *) fcinfo->context;
	Guard		guard;
	Relation	rel;
	TupleDesc	tupdesc;
	HeapTuple	row;
	HeapTuple	old = NULL;
	Datum		fingerprint;
	bool		isnull;
	char	   *new_key;
	char	   *old_key = NULL;
	char	   *text = NULL;
	const char *schema;
	Oid			owner;
	Oid			writer;
	NearsimOwnerState saved;
	bool		near = false;
	bool		by_index;
	bool		appeared = false;
	NearDuplicate found = {NULL, 0, NAN};
	MemoryContext caller = CurrentMemoryContext;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(data->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(data->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(data->tg_event) || TRIGGER_FIRED_BY_UPDATE(data->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("nearsim_guard_check must be a BEFORE INSERT OR UPDATE row trigger")));
	guard = guard_of(data->tg_trigger);
	rel = data->tg_relation;
	tupdesc = RelationGetDescr(rel);
	if (TRIGGER_FIRED_BY_UPDATE(data->tg_event))
	{
		row = data->tg_newtuple;
		old = data->tg_trigtuple;
	}
	else
		row = data->tg_trigtuple;

	fingerprint = heap_getattr(row, SPI_fnumber(tupdesc, guard.hash_column), tupdesc, &isnull);
	if (isnull)
		return PointerGetDatum(row);	/* no fingerprint: nothing is near it */

	owner = rel->rd_rel->relowner;
	writer = GetUserId();
	if (!guard_on)
	{
		if (has_privs_of_role(writer, owner))
			return PointerGetDatum(row);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only the owner of table %s may check documents in past its guard",
						RelationGetRelationName(rel)),
				 errhint("RESET nearsim.guard, or ask the owner.")));
	}

	new_key = column_text(row, tupdesc, guard.key_column);
	if (old != NULL)
		old_key = column_text(old, tupdesc, guard.key_column);
	if (!isnan(guard.min_similarity))
		text = column_text(row, tupdesc, guard.text_column);
	schema = get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid));

	/* guarded writers of this table, one after the other, until commit */
	lock_check_in(rel);

	/*
	 * By bits alone the rotation index is read here, unless the owner is
	 * under row-level security (FORCE), which only a statement applies.
	 */
	by_index = isnan(guard.min_similarity) &&
		!(rel->rd_rel->relrowsecurity && rel->rd_rel->relforcerowsecurity);
	if (by_index)
	{
		near = find_near_by_index(&guard, rel, DatumGetInt64(fingerprint), new_key, old_key,
								  owner, &found);
		if (!IsolationUsesXactSnapshot() && !(near && strcmp(guard.action, "record") == 0))
			goto decided;
	}

	nearsim_begin_as_owner(owner, &saved);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	if (!by_index)
		near = find_near_duplicate(&guard, schema, rel, DatumGetInt64(fingerprint), text,
								   new_key, old_key, &found);
	if (!near && IsolationUsesXactSnapshot())
	{
		/* a near-duplicate committed after this transaction's snapshot */
		List	   *seen = keys_within(&guard, schema, rel, DatumGetInt64(fingerprint), new_key,
									   old_key, false);
		List	   *now = keys_within(&guard, schema, rel, DatumGetInt64(fingerprint), new_key,
									  old_key, true);
		ListCell   *cell;

		foreach(cell, now)
			appeared |= !listed(seen, (const char *) lfirst(cell));
	}
	if (near && strcmp(guard.action, "record") == 0)
		record_link(&guard, new_key, &found);
	if (near && !by_index)
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);

		found.key = pstrdup(found.key);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	nearsim_end_as_owner(&saved);

decided:

	if (appeared)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to a concurrent check-in into table %s",
						RelationGetRelationName(rel)),
				 errdetail("A document within %d bits of this one was committed after this"
						   " transaction began.", guard.max_distance),
				 errhint("Retry the transaction: the guard then sees that document.")));
	if (!near || strcmp(guard.action, "record") == 0)
		return PointerGetDatum(row);
	if (strcmp(guard.action, "skip") == 0)
		return PointerGetDatum(NULL);
	if (!writer_may_see(rel, writer, &guard, found.key))
		ereport(ERROR,
				(errcode(ERRCODE_NEAR_DUPLICATE),
				 errmsg("near-duplicate document in table %s", RelationGetRelationName(rel)),
				 errdetail("A near-duplicate is already there; it is not named, as the writer"
						   " may not read it.")));
	if (isnan(found.similarity))
		ereport(ERROR,
				(errcode(ERRCODE_NEAR_DUPLICATE),
				 errmsg("document %s is a near-duplicate of %s in table %s", new_key, found.key,
						RelationGetRelationName(rel)),
				 errdetail("Key (%s)=(%s) is %d bits from existing key %s (the guard refuses"
						   " documents within %d bits).",
						   guard.key_column, new_key, found.distance, found.key,
						   guard.max_distance),
				 errhint("The table's owner checks one in anyway with SET LOCAL nearsim.guard ="
						 " off.")));
	ereport(ERROR,
			(errcode(ERRCODE_NEAR_DUPLICATE),
			 errmsg("document %s is a near-duplicate of %s in table %s", new_key, found.key,
					RelationGetRelationName(rel)),
			 errdetail("Key (%s)=(%s) is %.3f similar (%s) to existing key %s, %d bits apart"
					   " (the guard refuses %.3f and more).",
					   guard.key_column, new_key, found.similarity, guard.measure, found.key,
					   found.distance, guard.min_similarity),
			 errhint("The table's owner checks one in anyway with SET LOCAL nearsim.guard ="
					 " off.")));
	PG_RETURN_NULL();			/* not reached */
}

PG_FUNCTION_INFO_V1(nearsim_guard_lock);
/*
 * nearsim_guard_lock(tbl regclass): take the check-in lock of tbl until the
 * transaction ends, as the guard does, for a writer that checks documents
 * itself (nearsim-load --on-near-duplicate); for a role that may insert into
 * or update tbl.
 */
Datum
nearsim_guard_lock(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;

	/* a writer of some of its columns writes the table too */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT | ACL_UPDATE) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_INSERT | ACL_UPDATE,
								  ACLMASK_ANY) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(relid)),
				 errdetail("The check-in lock is for roles that may write the table.")));
	rel = table_open(relid, AccessShareLock);
	lock_check_in(rel);
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(nearsim_writes_as_owner);
/*
 * nearsim_writes_as_owner(tbl regclass): whether the current user has the
 * privileges of tbl's owner, who alone may write fingerprints the triggers
 * keep unchecked (the owner could turn the triggers off anyway).
 */
Datum
nearsim_writes_as_owner(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		PG_RETURN_BOOL(false);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	PG_RETURN_BOOL(has_privs_of_role(GetUserId(), owner));
}

/* Called from _PG_init: nearsim.guard */
void
nearsim_guard_init(void)
{
	DefineCustomBoolVariable("nearsim.guard",
							 "Whether check-in guards check the documents written.",
							 "Only the owner of a table may write past its guard with "
							 "SET LOCAL nearsim.guard = off; for other roles it stays on.",
							 &guard_on, true, PGC_USERSET, 0, NULL, NULL, NULL);
}
