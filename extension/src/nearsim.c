#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "utils/guc.h"

#include "nearsim.h"
#include "rotation.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* nearsim.max_pairs: see nearsim.h */
int			nearsim_max_pairs = NEARSIM_DEFAULT_MAX_PAIRS;

/*
 * Loading the library: the resource limits, what nearsim_btree indexes need
 * (src/btree.c), and the planner's rotation scan (src/planner.c, src/scan.c)
 */
void
_PG_init(void)
{
	DefineCustomIntVariable("nearsim.max_pairs",
							"Pairs of fingerprints an all-pairs search may hold in memory.",
							"nearsim_pairs, nearsim_clusters and the verified pairs and clusters "
							"refuse a radius whose pairs of distinct fingerprints (and, for "
							"clusters, pairs of documents) would exceed this, about 50 bytes "
							"each; pairs are sent on without being held. Only a superuser may "
							"change it.",
							&nearsim_max_pairs, NEARSIM_DEFAULT_MAX_PAIRS, 1000, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);
	nearsim_btree_init();
	nearsim_guard_init();
	nearsim_planner_init();
	nearsim_scan_init();
}
