#include "postgres.h"

#include "fmgr.h"

#include "nearsim.h"

PG_MODULE_MAGIC;
