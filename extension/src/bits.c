#include "postgres.h"

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "port/pg_bitutils.h"
#include "utils/builtins.h"

#include "nearsim.h"

/*
 * Fingerprints are unsigned 64-bit values kept in a signed bigint; every
 * function here works on the bits, so negative values need no special case.
 */

PG_FUNCTION_INFO_V1(nearsim_hamming);
/* Number of bits in which two fingerprints differ (popcount of the XOR) */
Datum
nearsim_hamming(PG_FUNCTION_ARGS)
{
	uint64		a = (uint64) PG_GETARG_INT64(0);
	uint64		b = (uint64) PG_GETARG_INT64(1);

	PG_RETURN_INT32(pg_popcount64(a ^ b));
}

PG_FUNCTION_INFO_V1(nearsim_simhash_bits);
/* The 64-character 0/1 string of a fingerprint, most significant bit first */
Datum
nearsim_simhash_bits(PG_FUNCTION_ARGS)
{
	uint64		value = (uint64) PG_GETARG_INT64(0);
	char		out[FINGERPRINT_BITS];

	for (int i = 0; i < FINGERPRINT_BITS; i++)
		out[i] = (value >> (FINGERPRINT_BITS - 1 - i)) & 1 ? '1' : '0';

	PG_RETURN_TEXT_P(cstring_to_text_with_len(out, FINGERPRINT_BITS));
}

PG_FUNCTION_INFO_V1(nearsim_simhash_from_bits);
/* The fingerprint written by simhash_bits; anything else is an error */
Datum
nearsim_simhash_from_bits(PG_FUNCTION_ARGS)
{
	text	   *input = PG_GETARG_TEXT_PP(0);
	const char *s = VARDATA_ANY(input);
	int			len = VARSIZE_ANY_EXHDR(input);
	uint64		value = 0;

	for (int i = 0; i < len && i < FINGERPRINT_BITS; i++)
	{
		if (s[i] != '0' && s[i] != '1')
		{
			int			position = pg_mbstrlen_with_len(s, i) + 1;
			int			charlen = pg_mblen(s + i);

			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid character \"%.*s\" at position %d of fingerprint bit string",
							charlen, s + i, position),
					 errhint("A fingerprint bit string has 64 characters '0' or '1', most significant bit first.")));
		}
		value = (value << 1) | (uint64) (s[i] - '0');
	}

	if (len != FINGERPRINT_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("fingerprint bit string has %d characters, not 64",
						pg_mbstrlen_with_len(s, len)),
				 errhint("A fingerprint bit string has 64 characters '0' or '1', most significant bit first.")));

	PG_RETURN_INT64((int64) value);
}
