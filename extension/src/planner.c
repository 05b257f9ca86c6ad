#include "postgres.h"

#include <math.h>

#include "access/stratnum.h"
#include "catalog/pg_class.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/supportnodes.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "rotation.h"
#include "scan.h"

/*
 * The planner's side of the rotation scan (scan.c executes it).  The SQL
 * users write, WHERE hamming(si, q) <= k, ORDER BY hamming(si, q) LIMIT n,
 * and JOIN ... ON hamming(d.si, n.si) <= k, names no operator an index
 * could serve: <= compares two integers, and hamming() is an ordinary
 * function.  A hook on the paths of each table offers, next to the
 * planner's own, a scan of the table's rotation index: within a radius
 * (also as the inner side of a nested loop, the query from the outer row),
 * or nearest first.  The planner weighs it against the others by cost, so
 * a tiny table or a radius that covers most of the table is still scanned.
 *
 * hamming() has a planner support function (nearsim_hamming_support) that
 * does nothing but is called while a query that calls hamming() is
 * planned: that loads this library, and with it the hook, before the
 * planner looks for paths, in a session that has not yet called any
 * function of nearsim.
 */

/* nearsim.enable_rotation_scan: whether the planner may use the rotation scan */
bool		nearsim_enable_rotation_scan = true;

static set_rel_pathlist_hook_type previous_set_rel_pathlist = NULL;

/* A radius assumed when the radius is not known when planning (a parameter) */
#define ASSUMED_RADIUS 6
/*
 * Cost of reading one key range of a rotation index: ranges are read in key
 * order, and most start on the page the one before ended on (keys.c)
 */
#define RANGE_COST_UNITS (60 * cpu_index_tuple_cost)
/* Cost of checking one key of a range (its distance, the bands that read it) */
#define KEY_COST_UNITS (6 * cpu_index_tuple_cost)
/*
 * Rows a LIMIT not known when planning (LIMIT $1, as ORMs send it) is
 * planned to take: any small number, since the nearest-first search takes
 * what is asked; without it a generic plan would expect the whole table
 */
#define ASSUMED_LIMIT 100.0
/* Most rows a scan may be planned to take (the private list holds an integer) */
#define MAX_WANTED 1000000000.0

/* The rotation index of one column of a table */
typedef struct ColumnIndex
{
	AttrNumber	attno;
	int			count;
	RotationBand bands[MAX_BANDS];
} ColumnIndex;

/* hamming(column, query) <= radius, in one of the forms people write */
typedef struct RadiusCondition
{
	RestrictInfo *clause;
	FuncExpr   *distance;		/* the hamming() call */
	AttrNumber	attno;
	Expr	   *query;
	Expr	   *limit;
	Oid			limit_type;
	int			adjust;			/* radius = limit + adjust */
} RadiusCondition;

/* The comparisons of an integer distance with a radius */
typedef struct Comparison
{
	Oid			function;
	bool		distance_left;	/* hamming() <= k, or k >= hamming() */
	Oid			limit_type;
	int			adjust;
} Comparison;

static const Comparison comparisons[] = {
	{F_INT4LE, true, INT4OID, 0}, {F_INT4LT, true, INT4OID, -1}, {F_INT4EQ, true, INT4OID, 0},
	{F_INT42LE, true, INT2OID, 0}, {F_INT42LT, true, INT2OID, -1}, {F_INT42EQ, true, INT2OID, 0},
	{F_INT48LE, true, INT8OID, 0}, {F_INT48LT, true, INT8OID, -1}, {F_INT48EQ, true, INT8OID, 0},
	{F_INT4GE, false, INT4OID, 0}, {F_INT4GT, false, INT4OID, -1}, {F_INT4EQ, false, INT4OID, 0},
	{F_INT24GE, false, INT2OID, 0}, {F_INT24GT, false, INT2OID, -1}, {F_INT24EQ, false, INT2OID, 0},
	{F_INT84GE, false, INT8OID, 0}, {F_INT84GT, false, INT8OID, -1}, {F_INT84EQ, false, INT8OID, 0},
};

/* Whether node is a column of relation relid (of this query level) */
static bool
is_column_of(Node *node, Index relid)
{
	return node != NULL && IsA(node, Var) && ((Var *) node)->varno == (int) relid &&
		((Var *) node)->varlevelsup == 0 && ((Var *) node)->varattno > 0;
}

/* Whether node is hamming(column of relid, query) or hamming(query, column) */
static bool
is_distance_to_column(Node *node, Index relid, AttrNumber *attno, Expr **query)
{
	FuncExpr   *call;
	Node	   *first;
	Node	   *second;

	if (node == NULL || !IsA(node, FuncExpr))
		return false;
	call = (FuncExpr *) node;
	if (list_length(call->args) != 2 || !nearsim_is_own_function(call->funcid, "nearsim_hamming"))
		return false;
	first = linitial(call->args);
	second = lsecond(call->args);
	if (is_column_of(first, relid))
	{
		*attno = ((Var *) first)->varattno;
		*query = (Expr *) second;
	}
	else if (is_column_of(second, relid))
	{
		*attno = ((Var *) second)->varattno;
		*query = (Expr *) first;
	}
	else
		return false;
	return true;
}

/* Whether an expression can be evaluated once per scan of relid */
static bool
outside_the_scan(PlannerInfo *root, Node *node, Index relid)
{
	return !bms_is_member(relid, pull_varnos(root, node)) && !contain_volatile_functions(node);
}

/* Whether clause is a radius condition on relid; its parts in *found */
static bool
match_radius(PlannerInfo *root, RestrictInfo *clause, Index relid, RadiusCondition *found)
{
	OpExpr	   *comparison;
	Oid			function;

	if (clause->pseudoconstant || !IsA(clause->clause, OpExpr))
		return false;
	comparison = (OpExpr *) clause->clause;
	if (list_length(comparison->args) != 2)
		return false;
	function = OidIsValid(comparison->opfuncid) ? comparison->opfuncid :
		get_opcode(comparison->opno);
	for (int i = 0; i < (int) lengthof(comparisons); i++)
	{
		const Comparison *form = &comparisons[i];
		Node	   *distance = form->distance_left ? linitial(comparison->args) :
			lsecond(comparison->args);
		Node	   *limit = form->distance_left ? lsecond(comparison->args) :
			linitial(comparison->args);

		if (form->function != function || exprType(limit) != form->limit_type ||
			!is_distance_to_column(distance, relid, &found->attno, &found->query))
			continue;
		if (!outside_the_scan(root, (Node *) found->query, relid) ||
			!outside_the_scan(root, limit, relid))
			return false;
		found->clause = clause;
		found->distance = (FuncExpr *) distance;
		found->limit = (Expr *) limit;
		found->limit_type = form->limit_type;
		found->adjust = form->adjust;
		return true;
	}
	return false;
}

/* The radius of a condition when planning: its constant, or an assumption */
static int
planned_radius(const RadiusCondition *condition)
{
	Const	   *limit = (Const *) condition->limit;

	if (!IsA(limit, Const))
		return ASSUMED_RADIUS;
	if (limit->constisnull)
		return -1;
	return nearsim_radius(limit->constvalue, condition->limit_type, condition->adjust);
}

/* The rotation indexes of a table, one per column that has a complete one */
static List *
rotation_indexes(RelOptInfo *rel)
{
	List	   *columns = NIL;
	ListCell   *cell;
	ColumnIndex *column;
	/* the candidates of each column, before they are checked to cover the bits */
	RotationBand found[MAX_BANDS * 2];
	AttrNumber	attnos[MAX_BANDS * 2];
	int			count = 0;

	foreach(cell, rel->indexlist)
	{
		IndexOptInfo *index = lfirst(cell);
		AttrNumber	attno;
		int			shift;

		if (index->ncolumns != 1 || index->indexkeys[0] != 0 || index->indpred != NIL ||
			index->hypothetical || list_length(index->indexprs) != 1 ||
			!nearsim_rotation_method(index->relam))
			continue;
		shift = nearsim_rotation_shift(linitial(index->indexprs), &attno);
		if (shift < 0 || count == lengthof(found))
			continue;
		found[count].index = index->indexoid;
		found[count].shift = shift;
		attnos[count++] = attno;
	}
	for (int i = 0; i < count; i++)
	{
		RotationBand bands[MAX_BANDS * 2];
		bool		seen = false;
		int			n = 0;

		for (int j = 0; j < i; j++)
			seen |= attnos[j] == attnos[i];
		if (seen)
			continue;
		for (int j = i; j < count; j++)
			if (attnos[j] == attnos[i])
				bands[n++] = found[j];
		n = nearsim_complete_bands(bands, n);
		if (n == 0)
			continue;
		column = palloc0(sizeof(ColumnIndex));
		column->attno = attnos[i];
		column->count = n;
		memcpy(column->bands, bands, sizeof(RotationBand) * n);
		columns = lappend(columns, column);
	}
	return columns;
}

/* The column's rotation index, or NULL */
static ColumnIndex *
index_of(List *columns, AttrNumber attno)
{
	ListCell   *cell;

	foreach(cell, columns)
		if (((ColumnIndex *) lfirst(cell))->attno == attno)
			return lfirst(cell);
	return NULL;
}

/* Cost of fetching and checking one row the index gives */
static double
row_cost(RelOptInfo *rel)
{
	return seq_page_cost + cpu_tuple_cost + rel->baserestrictcost.per_tuple;
}

/* Cost of a search within radius bits that fetches `rows` rows */
static double
search_cost(RelOptInfo *rel, const ColumnIndex *column, int radius, double rows)
{
	double		ranges;
	double		candidates;

	if (radius < 0)
		return 0;
	nearsim_search_work(column->bands, column->count, Max(rel->tuples, 1), radius, &ranges,
						&candidates);
	return ranges * RANGE_COST_UNITS + candidates * KEY_COST_UNITS + rows * row_cost(rel);
}

/* The path of a rotation scan; private as in scan.h, with the query and radius first */
static CustomPath *
make_path(RelOptInfo *rel, const ColumnIndex *column, bool nearest, Expr *query,
		  const RadiusCondition *radius, double wanted, List *ties)
{
	CustomPath *path = makeNode(CustomPath);
	List	   *indexes = NIL;
	List	   *shifts = NIL;
	List	   *widths = NIL;

	for (int i = 0; i < column->count; i++)
	{
		indexes = lappend_oid(indexes, column->bands[i].index);
		shifts = lappend_int(shifts, column->bands[i].shift);
		widths = lappend_int(widths, column->bands[i].width);
	}
	path->path.pathtype = T_CustomScan;
	path->path.parent = rel;
	path->path.pathtarget = rel->reltarget;
	path->path.parallel_aware = false;
	path->path.parallel_safe = false;
	path->path.parallel_workers = 0;
	path->flags = CUSTOMPATH_SUPPORT_PROJECTION;
	path->custom_paths = NIL;
	path->custom_private = list_make2(query, radius == NULL ? NULL : radius->limit);
	path->custom_private = lappend(path->custom_private, makeInteger(nearest ? 1 : 0));
	path->custom_private = lappend(path->custom_private,
								   makeInteger(radius == NULL ? InvalidOid : radius->limit_type));
	path->custom_private = lappend(path->custom_private,
								   makeInteger(radius == NULL ? 0 : radius->adjust));
	path->custom_private = lappend(path->custom_private,
								   makeInteger((int) Min(Max(wanted, 1), MAX_WANTED)));
	path->custom_private = lappend(path->custom_private, indexes);
	path->custom_private = lappend(path->custom_private, shifts);
	path->custom_private = lappend(path->custom_private, widths);
	/* the order within a distance (scan.h): none unless sort_ties found one */
	if (ties == NIL)
		for (int i = SCAN_PRIVATE_TIE_COLUMNS; i <= SCAN_PRIVATE_TIE_TYPES; i++)
			ties = lappend(ties, NIL);
	path->custom_private = list_concat(path->custom_private, ties);
	path->methods = NULL;		/* set by the caller */
	return path;
}

static Plan *plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *path, List *tlist,
					   List *clauses, List *custom_plans);

static const CustomPathMethods path_methods = {
	.CustomName = NEARSIM_SCAN_NAME,
	.PlanCustomPath = plan_path,
};

/* The plan of a rotation scan path: the scan checks every condition again */
static Plan *
plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *path, List *tlist, List *clauses,
		  List *custom_plans)
{
	CustomScan *scan = makeNode(CustomScan);

	scan->scan.plan.targetlist = tlist;
	scan->scan.plan.qual = extract_actual_clauses(clauses, false);
	scan->scan.scanrelid = rel->relid;
	scan->flags = path->flags;
	scan->custom_plans = NIL;
	/* the query and the radius: create_customscan_plan puts in the outer rows' parameters */
	scan->custom_exprs = list_make2(copyObject(linitial(path->custom_private)),
									copyObject(lsecond(path->custom_private)));
	scan->custom_private = list_copy_tail(path->custom_private, 2);
	scan->custom_scan_tlist = NIL;
	scan->methods = &nearsim_scan_methods;
	return &scan->scan.plan;
}

/* Whether clause compares the same distance as condition (hamming(...) >= 0 and the like) */
static bool
compares_distance(RestrictInfo *clause, const RadiusCondition *condition)
{
	ListCell   *cell;

	if (!IsA(clause->clause, OpExpr))
		return false;
	foreach(cell, ((OpExpr *) clause->clause)->args)
		if (equal(lfirst(cell), condition->distance))
			return true;
	return false;
}

/*
 * Sets the table's row estimate from the radius: the planner knows nothing
 * of hamming() and guesses a third of the table for any inequality.  The
 * share of random fingerprints within the radius, times what the other
 * conditions keep.
 */
static void
estimate_rows(PlannerInfo *root, RelOptInfo *rel, const RadiusCondition *condition)
{
	List	   *others = NIL;
	ListCell   *cell;
	double		rows;
	double		factor;

	foreach(cell, rel->baserestrictinfo)
		if (!compares_distance(lfirst(cell), condition))
			others = lappend(others, lfirst(cell));
	rows = clamp_row_est(rel->tuples * nearsim_share_within(planned_radius(condition)) *
						 clauselist_selectivity(root, others, rel->relid, JOIN_INNER, NULL));
	factor = rows / Max(rel->rows, 1);
	foreach(cell, rel->pathlist)
		if (((Path *) lfirst(cell))->param_info == NULL)
			((Path *) lfirst(cell))->rows = rows;
	foreach(cell, rel->partial_pathlist)
		((Path *) lfirst(cell))->rows = clamp_row_est(((Path *) lfirst(cell))->rows * factor);
	rel->rows = rows;
}

/*
 * A path within the radius of a condition: of the table's own conditions,
 * or of a join condition (join), whose query comes from the outer row of a
 * nested loop: the path is then parameterized by the relations it names.
 */
static void
add_radius_path(PlannerInfo *root, RelOptInfo *rel, const ColumnIndex *column,
				const RadiusCondition *condition, bool join)
{
	int			radius = planned_radius(condition);
	double		fetched = clamp_row_est(rel->tuples * nearsim_share_within(radius));
	ParamPathInfo *parameters = NULL;
	double		rows = rel->rows;
	CustomPath *path;

	if (join)
	{
		Relids		outer = bms_union(pull_varnos(root, (Node *) condition->query),
									  pull_varnos(root, (Node *) condition->limit));

		outer = bms_del_member(outer, rel->relid);
		if (bms_is_empty(outer) || bms_overlap(outer, rel->lateral_referencers) ||
			!join_clause_is_movable_to(condition->clause, rel))
			return;
		parameters = get_baserel_parampathinfo(root, rel, outer);
		if (parameters == NULL || !list_member_ptr(parameters->ppi_clauses, condition->clause))
			return;
		parameters->ppi_rows = Min(parameters->ppi_rows,
								   clamp_row_est(rel->rows * nearsim_share_within(radius)));
		rows = parameters->ppi_rows;
	}
	path = make_path(rel, column, false, condition->query, condition, rows, NIL);
	path->path.param_info = parameters;
	path->path.rows = rows;
	path->path.startup_cost = rel->baserestrictcost.startup;
	path->path.total_cost = path->path.startup_cost + search_cost(rel, column, radius, fetched);
	path->path.pathkeys = NIL;
	path->methods = &path_methods;
	add_path(rel, &path->path);
}

/* An expression without the relabelling of a binary-compatible type (varchar as text) */
static Node *
without_relabel(Node *expr)
{
	while (expr != NULL && IsA(expr, RelabelType))
		expr = (Node *) ((RelabelType *) expr)->arg;
	return expr;
}

/*
 * When the query's sort keys after the distance are columns of the table
 * that the scan can sort the rows of one distance by (ORDER BY
 * hamming(si, q), id), the tie lists of the plan (scan.h); else NIL.  An
 * incremental sort above the scan would instead read on to the first row
 * of the next distance, which may cost as much again as the rows asked
 * for.
 */
static List *
sort_ties(PlannerInfo *root, RelOptInfo *rel)
{
	List	   *columns = NIL;
	List	   *operators = NIL;
	List	   *collations = NIL;
	List	   *nulls_first = NIL;
	List	   *types = NIL;
	ListCell   *cell;

	for_each_from(cell, root->query_pathkeys, 1)
	{
		PathKey    *key = lfirst(cell);
		EquivalenceMember *column = NULL;
		Var		   *var = NULL;
		ListCell   *member_cell;
		Oid			operator;

		if (key->pk_eclass->ec_has_volatile)
			return NIL;
		foreach(member_cell, key->pk_eclass->ec_members)
		{
			EquivalenceMember *member = lfirst(member_cell);
			Node	   *expr = without_relabel((Node *) member->em_expr);

			if (!member->em_is_child && bms_equal(member->em_relids, rel->relids) &&
				is_column_of(expr, rel->relid))
			{
				column = member;
				var = (Var *) expr;
				break;
			}
		}
		if (column == NULL)
			return NIL;
		operator = get_opfamily_member(key->pk_opfamily, column->em_datatype,
									   column->em_datatype, key->pk_strategy);
		if (!OidIsValid(operator))
			return NIL;
		columns = lappend_int(columns, var->varattno);
		operators = lappend_oid(operators, operator);
		collations = lappend_oid(collations, key->pk_eclass->ec_collation);
		nulls_first = lappend_int(nulls_first, key->pk_nulls_first ? 1 : 0);
		types = lappend_oid(types, column->em_datatype);
	}
	if (columns == NIL)
		return NIL;
	/* in the order of SCAN_PRIVATE_TIE_COLUMNS to SCAN_PRIVATE_TIE_TYPES */
	return list_make5(columns, operators, collations, nulls_first, types);
}

/*
 * A nearest-first path, when the query is ordered by hamming(column, q)
 * ascending with q known before the scan; a radius condition on the same
 * distance bounds it.
 */
static void
add_nearest_path(PlannerInfo *root, RelOptInfo *rel, List *columns, List *conditions)
{
	PathKey    *order;
	ListCell   *cell;
	FuncExpr   *distance = NULL;
	Expr	   *query = NULL;
	AttrNumber	attno = 0;
	ColumnIndex *column;
	RadiusCondition *bound = NULL;
	double		wanted;
	int			expected;
	double		work;
	List	   *ties;
	CustomPath *path;

	if (root->query_pathkeys == NIL)
		return;
	order = linitial(root->query_pathkeys);
	if (order->pk_strategy != BTLessStrategyNumber || order->pk_nulls_first ||
		order->pk_opfamily != INTEGER_BTREE_FAM_OID || order->pk_eclass->ec_has_volatile)
		return;
	foreach(cell, order->pk_eclass->ec_members)
	{
		EquivalenceMember *member = lfirst(cell);

		if (!bms_equal(member->em_relids, rel->relids) ||
			!is_distance_to_column((Node *) member->em_expr, rel->relid, &attno, &query) ||
			!bms_is_empty(pull_varnos(root, (Node *) query)) ||
			contain_volatile_functions((Node *) query))
			continue;
		distance = (FuncExpr *) member->em_expr;
		break;
	}
	if (distance == NULL || (column = index_of(columns, attno)) == NULL)
		return;
	foreach(cell, conditions)
		if (equal(((RadiusCondition *) lfirst(cell))->distance, distance))
			bound = lfirst(cell);
	wanted = root->limit_tuples > 0 ? Min(root->limit_tuples, rel->rows) :
		root->parse->limitCount != NULL ? Min(ASSUMED_LIMIT, rel->rows) : rel->rows;
	expected = nearsim_expected_distance(Max(rel->tuples, 1), wanted);
	if (bound != NULL)
		expected = Min(expected, planned_radius(bound));
	/* the rings to that distance, or whole reads of one index per distance beyond */
	work = Min(search_cost(rel, column, expected, 0),
			   Max(rel->tuples, 1) * KEY_COST_UNITS * (expected + 1));
	ties = sort_ties(root, rel);
	path = make_path(rel, column, true, query, bound, wanted, ties);
	path->path.param_info = NULL;
	path->path.rows = rel->rows;
	path->path.startup_cost = rel->baserestrictcost.startup + work + wanted * row_cost(rel);
	path->path.total_cost = path->path.startup_cost + rel->rows * cpu_tuple_cost;
	path->path.pathkeys = ties != NIL ? root->query_pathkeys : list_make1(order);
	path->methods = &path_methods;
	add_path(rel, &path->path);
}

/* The hook: offers rotation scans of a table that has a rotation index */
static void
add_rotation_paths(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	List	   *columns;
	List	   *conditions = NIL;
	ListCell   *cell;
	bool		estimated = false;

	if (previous_set_rel_pathlist != NULL)
		previous_set_rel_pathlist(root, rel, rti, rte);
	if (!nearsim_enable_rotation_scan || rte->rtekind != RTE_RELATION ||
		rte->relkind != RELKIND_RELATION || rte->tablesample != NULL ||
		rel->indexlist == NIL || IS_DUMMY_REL(rel) ||
		(rel->reloptkind != RELOPT_BASEREL && rel->reloptkind != RELOPT_OTHER_MEMBER_REL))
		return;
	columns = rotation_indexes(rel);
	if (columns == NIL)
		return;

	foreach(cell, rel->baserestrictinfo)
	{
		RadiusCondition condition;
		ColumnIndex *column;

		if (!match_radius(root, lfirst(cell), rel->relid, &condition) ||
			(column = index_of(columns, condition.attno)) == NULL)
			continue;
		conditions = lappend(conditions, palloc(sizeof(RadiusCondition)));
		memcpy(llast(conditions), &condition, sizeof(RadiusCondition));
		if (!estimated)
		{
			estimate_rows(root, rel, &condition);
			estimated = true;
		}
		add_radius_path(root, rel, column, &condition, false);
	}
	foreach(cell, rel->joininfo)
	{
		RadiusCondition condition;
		ColumnIndex *column;

		if (match_radius(root, lfirst(cell), rel->relid, &condition) &&
			(column = index_of(columns, condition.attno)) != NULL)
			add_radius_path(root, rel, column, &condition, true);
	}
	add_nearest_path(root, rel, columns, conditions);
}

/* Installs the hook and the setting */
void
nearsim_planner_init(void)
{
	DefineCustomBoolVariable("nearsim.enable_rotation_scan",
							 "Lets the planner read rotation indexes for hamming() conditions and order.",
							 "WHERE hamming(si, q) <= k, joins on such a condition and ORDER BY "
							 "hamming(si, q) read the table's rotation index when that costs less "
							 "than the alternatives; off leaves them to the planner's own paths "
							 "(sequential scans), as enable_indexscan does for indexes.",
							 &nearsim_enable_rotation_scan, true, PGC_USERSET, 0,
							 NULL, NULL, NULL);
	previous_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = add_rotation_paths;
}

PG_FUNCTION_INFO_V1(nearsim_hamming_support);
/*
 * The planner support function of hamming(): nothing to simplify or
 * estimate, but calling it loads this library while a query that calls
 * hamming() is planned, and so the hook above.
 */
Datum
nearsim_hamming_support(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(NULL);
}
