#include "postgres.h"

#include "fmgr.h"

PG_MODULE_MAGIC;
