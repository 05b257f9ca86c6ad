#include "postgres.h"

#include "fmgr.h"

#include "nearsim.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Loading the library: what nearsim_btree indexes need (src/btree.c) */
void
_PG_init(void)
{
	nearsim_btree_init();
}
