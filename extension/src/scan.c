#include "postgres.h"

#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/nodeCustom.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/tuplesort.h"
#include "utils/ruleutils.h"

#include "rotation.h"
#include "scan.h"

/*
 * The executor's side of the rotation scan (the plans are made in
 * planner.c): a scan of an enabled table that reads its rotation index for
 * the rows within a radius of a query (WHERE hamming(si, q) <= k), or
 * nearest first (ORDER BY hamming(si, q)).  The query and the radius are
 * expressions evaluated at each rescan (constants, parameters, or the
 * columns of the outer row of a nested loop); every row it gives is
 * checked again by all of the scan's conditions, in the order the planner
 * chose (row-level security first), so that it gives exactly the rows a
 * sequential scan would.
 */

typedef struct RotationScanState
{
	CustomScanState css;
	ExprState  *query;
	ExprState  *limit;			/* NULL: no radius */
	Oid			limit_type;
	int			limit_adjust;	/* radius = limit + adjust (-1 for <) */
	bool		nearest;
	double		wanted;
	int			count;
	RotationBand bands[MAX_BANDS];
	RotationSearch *search;
	bool		started;

	/* nearest first, the rows at one distance sorted by further keys (scan.h) */
	int			tie_count;
	AttrNumber *tie_columns;	/* of the table */
	AttrNumber *tie_positions;	/* 1 to tie_count: in tie_slot */
	Oid		   *tie_operators;
	Oid		   *tie_collations;
	bool	   *tie_nulls_first;
	TupleTableSlot *tie_slot;	/* the keys of a row, then its tuple id */
	Tuplesortstate *sorter;		/* the rows of one distance (made once, reset for each) */
	bool		sorted;			/* the sorter's rows are sorted and being given */
	bool		pending;		/* a row of the next distance, read already */
	ItemPointerData pending_tid;
	int			pending_distance;
} RotationScanState;

static Node *create_scan_state(CustomScan *plan);
static void begin_scan(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *exec_scan(CustomScanState *node);
static void end_scan(CustomScanState *node);
static void rescan(CustomScanState *node);
static void explain_scan(CustomScanState *node, List *ancestors, ExplainState *es);
static void reset_ties(RotationScanState *state);

const CustomScanMethods nearsim_scan_methods = {
	.CustomName = NEARSIM_SCAN_NAME,
	.CreateCustomScanState = create_scan_state,
};

static const CustomExecMethods exec_methods = {
	.CustomName = NEARSIM_SCAN_NAME,
	.BeginCustomScan = begin_scan,
	.ExecCustomScan = exec_scan,
	.EndCustomScan = end_scan,
	.ReScanCustomScan = rescan,
	.ExplainCustomScan = explain_scan,
};

/* Registers the scan, so that plans naming it can be copied and read */
void
nearsim_scan_init(void)
{
	RegisterCustomScanMethods(&nearsim_scan_methods);
}

/* The state of a rotation scan, from its plan's private list (scan.h) */
static Node *
create_scan_state(CustomScan *plan)
{
	RotationScanState *state = (RotationScanState *) newNode(sizeof(RotationScanState),
															 T_CustomScanState);
	List	   *private = plan->custom_private;
	List	   *indexes = list_nth(private, SCAN_PRIVATE_INDEXES);
	List	   *shifts = list_nth(private, SCAN_PRIVATE_SHIFTS);
	List	   *widths = list_nth(private, SCAN_PRIVATE_WIDTHS);

	state->css.methods = &exec_methods;
	state->nearest = intVal(list_nth(private, SCAN_PRIVATE_NEAREST)) != 0;
	state->limit_type = (Oid) intVal(list_nth(private, SCAN_PRIVATE_LIMIT_TYPE));
	state->limit_adjust = intVal(list_nth(private, SCAN_PRIVATE_LIMIT_ADJUST));
	state->wanted = (double) intVal(list_nth(private, SCAN_PRIVATE_WANTED));
	state->count = list_length(indexes);
	for (int i = 0; i < state->count; i++)
	{
		state->bands[i].index = list_nth_oid(indexes, i);
		state->bands[i].shift = list_nth_int(shifts, i);
		state->bands[i].width = list_nth_int(widths, i);
	}
	state->tie_count = list_length(list_nth(private, SCAN_PRIVATE_TIE_COLUMNS));
	return (Node *) state;
}

/* The sort keys of the rows at one distance, and the slot of a row's keys */
static void
begin_ties(RotationScanState *state, List *private)
{
	List	   *columns = list_nth(private, SCAN_PRIVATE_TIE_COLUMNS);
	List	   *operators = list_nth(private, SCAN_PRIVATE_TIE_OPERATORS);
	List	   *collations = list_nth(private, SCAN_PRIVATE_TIE_COLLATIONS);
	List	   *nulls_first = list_nth(private, SCAN_PRIVATE_TIE_NULLS_FIRST);
	List	   *types = list_nth(private, SCAN_PRIVATE_TIE_TYPES);
	int			count = state->tie_count;
	TupleDesc	keys = CreateTemplateTupleDesc(count + 1);

	state->tie_columns = palloc(sizeof(AttrNumber) * count);
	state->tie_positions = palloc(sizeof(AttrNumber) * count);
	state->tie_operators = palloc(sizeof(Oid) * count);
	state->tie_collations = palloc(sizeof(Oid) * count);
	state->tie_nulls_first = palloc(sizeof(bool) * count);
	for (int i = 0; i < count; i++)
	{
		state->tie_columns[i] = (AttrNumber) list_nth_int(columns, i);
		state->tie_positions[i] = (AttrNumber) (i + 1);
		state->tie_operators[i] = list_nth_oid(operators, i);
		state->tie_collations[i] = list_nth_oid(collations, i);
		state->tie_nulls_first[i] = list_nth_int(nulls_first, i) != 0;
		TupleDescInitEntry(keys, (AttrNumber) (i + 1), NULL, list_nth_oid(types, i), -1, 0);
		TupleDescInitEntryCollation(keys, (AttrNumber) (i + 1), state->tie_collations[i]);
	}
	TupleDescInitEntry(keys, (AttrNumber) (count + 1), NULL, TIDOID, -1, 0);
	state->tie_slot = MakeSingleTupleTableSlot(keys, &TTSOpsMinimalTuple);
}

static void
begin_scan(CustomScanState *node, EState *estate, int eflags)
{
	RotationScanState *state = (RotationScanState *) node;
	CustomScan *plan = (CustomScan *) node->ss.ps.plan;
	Expr	   *limit = lsecond(plan->custom_exprs);

	Relation	table = node->ss.ss_currentRelation;

	/*
	 * PostgreSQL 15 gives a custom scan a virtual slot; the rows are fetched
	 * into one of the table's own kind, so the conditions and the projection
	 * are compiled again for it.
	 */
	ExecInitScanTupleSlot(estate, &node->ss, RelationGetDescr(table),
						  table_slot_callbacks(table));
	ExecAssignScanProjectionInfoWithVarno(&node->ss, plan->scan.scanrelid);
	node->ss.ps.qual = ExecInitQual(plan->scan.plan.qual, (PlanState *) node);
	state->query = ExecInitExpr(linitial(plan->custom_exprs), &node->ss.ps);
	state->limit = limit == NULL ? NULL : ExecInitExpr(limit, &node->ss.ps);
	if (state->tie_count > 0)
		begin_ties(state, plan->custom_private);
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	state->search = nearsim_search_begin(table, state->bands,
										 state->count, estate->es_snapshot);
}

/* The radius of the scan's condition, or -1 when no row can meet it */
static int
radius_of(RotationScanState *state, ExprContext *context, bool *isnull)
{
	Datum		value = ExecEvalExpr(state->limit, context, isnull);

	return *isnull ? -1 : nearsim_radius(value, state->limit_type, state->limit_adjust);
}

/* Evaluates the query and the radius, and starts the search */
static void
start_search(RotationScanState *state)
{
	ExprContext *context = state->css.ss.ps.ps_ExprContext;
	bool		query_null;
	bool		limit_null = false;
	Datum		query = ExecEvalExpr(state->query, context, &query_null);
	int			radius = state->limit == NULL ? FINGERPRINT_BITS :
		radius_of(state, context, &limit_null);

	if (state->nearest)
		nearsim_search_nearest(state->search, query_null, (uint64) DatumGetInt64(query),
							   limit_null ? -1 : radius, state->limit == NULL,
							   state->wanted);
	else
		nearsim_search_radius(state->search, (uint64) DatumGetInt64(query),
							  query_null || limit_null ? -1 : radius);
	state->started = true;
}

/* Forgets the rows of a distance being given and the row read ahead */
static void
reset_ties(RotationScanState *state)
{
	if (state->sorter != NULL)
		tuplesort_reset(state->sorter);
	state->sorted = false;
	state->pending = false;
}

/* Adds the row in slot to the rows of its distance: its sort keys and tuple id */
static void
sort_row(RotationScanState *state, TupleTableSlot *slot)
{
	TupleTableSlot *keys = state->tie_slot;
	ItemPointerData tid = slot->tts_tid;

	ExecClearTuple(keys);
	for (int i = 0; i < state->tie_count; i++)
		keys->tts_values[i] = slot_getattr(slot, state->tie_columns[i], &keys->tts_isnull[i]);
	keys->tts_values[state->tie_count] = PointerGetDatum(&tid);
	keys->tts_isnull[state->tie_count] = false;
	ExecStoreVirtualTuple(keys);
	tuplesort_puttupleslot(state->sorter, keys);	/* copies it */
}

/*
 * The next row nearest first, the rows of one distance sorted by the
 * further keys.  A distance's rows are read until the search knows it has
 * given them all (without reading on: a LIMIT then costs no more than
 * without the further keys), or until a row of the next distance comes,
 * which is kept for later; they are sorted by their keys and fetched again
 * by tuple id, in order.
 */
static TupleTableSlot *
next_row_in_order(RotationScanState *state, TupleTableSlot *slot)
{
	EState	   *estate = state->css.ss.ps.state;

	for (;;)
	{
		MemoryContext previous;
		int			distance;
		int			next_distance;

		if (state->sorted)
		{
			bool		isnull;

			while (tuplesort_gettupleslot(state->sorter, true, false, state->tie_slot, NULL))
			{
				ItemPointer tid = (ItemPointer) DatumGetPointer(slot_getattr(state->tie_slot,
																   state->tie_count + 1,
																   &isnull));

				if (nearsim_search_fetch(state->search, tid, slot))
					return slot;
			}
			tuplesort_reset(state->sorter); /* the row read ahead, if any, is next */
			state->sorted = false;
		}
		if (state->pending)
		{
			state->pending = false;
			distance = state->pending_distance;
			if (!nearsim_search_fetch(state->search, &state->pending_tid, slot))
				continue;
		}
		else if (!nearsim_search_next(state->search, slot, &distance))
			return ExecClearTuple(slot);
		if (nearsim_search_given_all(state->search, distance))
			return slot;		/* the one row of its distance */

		if (state->sorter == NULL)
		{
			previous = MemoryContextSwitchTo(estate->es_query_cxt);
			state->sorter = tuplesort_begin_heap(state->tie_slot->tts_tupleDescriptor,
												 state->tie_count, state->tie_positions,
												 state->tie_operators, state->tie_collations,
												 state->tie_nulls_first, work_mem, NULL,
												 TUPLESORT_NONE);
			MemoryContextSwitchTo(previous);
		}
		sort_row(state, slot);
		while (!nearsim_search_given_all(state->search, distance) &&
			   nearsim_search_next(state->search, slot, &next_distance))
		{
			if (next_distance != distance)
			{
				state->pending = true;
				state->pending_tid = slot->tts_tid;
				state->pending_distance = next_distance;
				break;
			}
			sort_row(state, slot);
		}
		tuplesort_performsort(state->sorter);
		state->sorted = true;
	}
}

/* The next row of the search, for ExecScan (which checks the conditions) */
static TupleTableSlot *
next_row(ScanState *node)
{
	RotationScanState *state = (RotationScanState *) node;
	TupleTableSlot *slot = node->ss_ScanTupleSlot;
	int			distance;

	if (!state->started)
		start_search(state);
	if (state->tie_count > 0)
		return next_row_in_order(state, slot);
	if (nearsim_search_next(state->search, slot, &distance))
		return slot;
	return ExecClearTuple(slot);
}

/* EvalPlanQual: the conditions, which ExecScan checks, decide */
static bool
recheck_row(ScanState *node, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
exec_scan(CustomScanState *node)
{
	return ExecScan(&node->ss, next_row, recheck_row);
}

static void
end_scan(CustomScanState *node)
{
	RotationScanState *state = (RotationScanState *) node;

	if (state->sorter != NULL)
		tuplesort_end(state->sorter);
	if (state->tie_slot != NULL)
		ExecDropSingleTupleTableSlot(state->tie_slot);
	if (state->search != NULL)
		nearsim_search_end(state->search);
}

/* A rescan (new parameters: the next outer row) searches again */
static void
rescan(CustomScanState *node)
{
	((RotationScanState *) node)->started = false;
	reset_ties((RotationScanState *) node);
	ExecScanReScan(&node->ss);
}

/* EXPLAIN: the indexes read, the query and the radius or the order */
static void
explain_scan(CustomScanState *node, List *ancestors, ExplainState *es)
{
	RotationScanState *state = (RotationScanState *) node;
	CustomScan *plan = (CustomScan *) node->ss.ps.plan;
	List	   *context = set_deparse_context_plan(es->deparse_cxt, &plan->scan.plan, ancestors);
	char	   *query = deparse_expression(linitial(plan->custom_exprs), context, es->verbose,
										   false);
	Expr	   *limit = lsecond(plan->custom_exprs);
	StringInfoData names;

	initStringInfo(&names);
	for (int i = 0; i < state->count; i++)
	{
		char	   *name = get_rel_name(state->bands[i].index);

		appendStringInfo(&names, "%s%s", i == 0 ? "" : ", ",
						 name == NULL ? "?" : quote_identifier(name));
	}
	ExplainPropertyText("Rotation Index", names.data, es);
	ExplainPropertyText(state->nearest ? "Nearest To" : "Within Radius Of", query, es);
	if (limit != NULL)
	{
		char	   *radius = deparse_expression((Node *) limit, context, es->verbose, false);

		ExplainPropertyText("Radius", state->limit_adjust == 0 ? radius :
							psprintf("%s - 1", radius), es);
	}
	if (state->tie_count > 0)
	{
		Oid			table = RelationGetRelid(node->ss.ss_currentRelation);
		StringInfoData columns;

		initStringInfo(&columns);
		for (int i = 0; i < state->tie_count; i++)
		{
			Oid			family;
			Oid			type;
			int16		strategy = BTLessStrategyNumber;
			bool		descending;

			get_ordering_op_properties(state->tie_operators[i], &family, &type, &strategy);
			descending = strategy == BTGreaterStrategyNumber;
			appendStringInfo(&columns, "%s%s%s%s", i == 0 ? "" : ", ",
							 quote_identifier(get_attname(table, state->tie_columns[i], false)),
							 descending ? " DESC" : "",
							 state->tie_nulls_first[i] == descending ? "" :
							 state->tie_nulls_first[i] ? " NULLS FIRST" : " NULLS LAST");
		}
		ExplainPropertyText("Equal Distances Sorted By", columns.data, es);
	}
}
