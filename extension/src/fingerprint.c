#include "postgres.h"

#include "common/unicode_norm.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/memutils.h"

/* xxHash compiled into this module: no library needed at run time */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "nearsim.h"
#include "unicode14_tables.h"

/*
 * The fingerprint of profile default/1 (see python_client/nearsim/
 * fingerprint.py, the reference it must equal bit for bit):
 *
 * 1. default ignorable code points are removed, code points unassigned in
 *    Unicode 14.0.0 become spaces;
 * 2. NFKC (PostgreSQL's tables are Unicode 14.0.0), then str.casefold();
 * 3. tokens are runs of word characters, a solo character (ideographs,
 *    hiragana) is a token of its own;
 * 4. features are word 3-shingles (a text of one or two tokens has one
 *    feature, all of them);
 * 5. xxh64 of each feature's UTF-8 bytes, bit i set iff more than half of
 *    the features have it set.
 *
 * The text is processed in pieces cut before ASCII whitespace (or, in text
 * without any, before a character that no normalisation reaches across), so
 * normalisation needs memory for one piece at a time.  The tokens go into a
 * buffer that keeps only the last two tokens and the one being read, so a
 * shingle may span pieces.  ASCII text goes through a byte table.
 */

/* Pieces of about this many bytes are normalised at a time */
#define PIECE_BYTES (1 << 20)
/* ASCII stretches go through the byte table this many bytes at a time */
#define ASCII_CHUNK (1 << 16)
/* Number of tokens in a shingle */
#define SHINGLE_WORDS 3
/* A byte lane of a uint64 counts up to 255 hashes before it overflows */
#define LANE_LIMIT 255
#define EVERY_BYTES_LOW_BIT UINT64CONST(0x0101010101010101)

/*
 * Tokens and votes.  buf holds the tokens read so far, each followed by one
 * space, from the oldest one still needed; a shingle is the bytes from the
 * start of a token to the end of the token two further on.
 */
typedef struct Shingler
{
	char	   *buf;
	Size		len;
	Size		cap;
	Size		starts[SHINGLE_WORDS - 1];	/* the last two complete tokens,
											 * older first */
	Size		token_start;	/* of the token being read */
	bool		in_token;
	uint64		tokens;			/* complete tokens so far */
	/* lanes[k] byte b: hashes with bit 8 * b + k set, since the last flush */
	uint64		lanes[8];
	int			pending;		/* hashes in lanes */
	uint64		counts[FINGERPRINT_BITS];
	uint64		total;			/* hashes voted */
	/* a stretch of text in code points, for the general steps */
	pg_wchar   *wchars;
	Size		wchars_cap;
} Shingler;

/* Kind of cp in a sorted table of disjoint ranges (0 when in none) */
static inline int
range_kind(const UnicodeRange *table, int n, pg_wchar cp)
{
	int			low = 0;
	int			high = n - 1;

	if (cp < table[0].first || cp > table[n - 1].last)
		return 0;
	while (low <= high)
	{
		int			mid = (low + high) / 2;

		if (cp < table[mid].first)
			high = mid - 1;
		else if (cp > table[mid].last)
			low = mid + 1;
		else
			return table[mid].kind;
	}
	return 0;
}

/* The case folding of cp (a non-ASCII code point), or NULL when it is itself */
static const CaseFolding *
casefold_lookup(pg_wchar cp)
{
	int			low = 0;
	int			high = lengthof(casefold_table) - 1;

	while (low <= high)
	{
		int			mid = (low + high) / 2;

		if (cp < casefold_table[mid].code)
			high = mid - 1;
		else if (cp > casefold_table[mid].code)
			low = mid + 1;
		else
			return &casefold_table[mid];
	}
	return NULL;
}

/* The whitespace before which the reference cuts texts: [\t\n\v\f\r ] */
static inline bool
is_ascii_space(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Add the counts in the byte lanes to the bit counts */
static void
vote_flush(Shingler *sh)
{
	for (int k = 0; k < 8; k++)
	{
		for (int b = 0; b < 8; b++)
			sh->counts[8 * b + k] += (sh->lanes[k] >> (8 * b)) & 0xFF;
		sh->lanes[k] = 0;
	}
	sh->pending = 0;
}

/* Count one feature hash in the vote, eight bits per addition */
static inline void
vote_hash(Shingler *sh, uint64 hash)
{
	for (int k = 0; k < 8; k++)
		sh->lanes[k] += (hash >> k) & EVERY_BYTES_LOW_BIT;
	sh->total++;
	if (++sh->pending == LANE_LIMIT)
		vote_flush(sh);
}

/*
 * Make room for n more bytes in the buffer: first drop the tokens no
 * shingle needs any more, then grow it (beyond 1 GB only for a huge token).
 */
static void
reserve(Shingler *sh, Size n)
{
	Size		keep;

	if (sh->len + n <= sh->cap)
		return;
	if (sh->tokens >= 2)
		keep = sh->starts[0];
	else if (sh->tokens == 1)
		keep = sh->starts[1];
	else
		keep = sh->in_token ? sh->token_start : sh->len;
	if (keep > 0)
	{
		memmove(sh->buf, sh->buf + keep, sh->len - keep);
		sh->len -= keep;
		for (int i = 0; i < SHINGLE_WORDS - 1; i++)
			sh->starts[i] = sh->starts[i] >= keep ? sh->starts[i] - keep : 0;
		sh->token_start = sh->token_start >= keep ? sh->token_start - keep : 0;
	}
	if (sh->len + n > sh->cap)
	{
		Size		cap = Max(sh->cap * 2, sh->len + n);

		sh->buf = repalloc_huge(sh->buf, cap);
		sh->cap = cap;
	}
}

/* The token being read is complete: vote for the shingle it ends */
static inline void
end_token(Shingler *sh)
{
	if (!sh->in_token)
		return;
	if (sh->tokens >= SHINGLE_WORDS - 1)
		vote_hash(sh, XXH64(sh->buf + sh->starts[0], sh->len - sh->starts[0], 0));
	sh->buf[sh->len++] = ' ';	/* reserved with the token's last byte */
	sh->starts[0] = sh->starts[1];
	sh->starts[1] = sh->token_start;
	sh->tokens++;
	sh->in_token = false;
}

/* Append one byte of a token (room reserved by the caller, plus one) */
static inline void
token_byte(Shingler *sh, char c)
{
	if (!sh->in_token)
	{
		sh->token_start = sh->len;
		sh->in_token = true;
	}
	sh->buf[sh->len++] = c;
}

/* Steps 1 to 3 for ASCII text: the byte table */
static void
read_ascii(Shingler *sh, const unsigned char *s, Size n)
{
	while (n > 0)
	{
		Size		chunk = Min(n, ASCII_CHUNK);

		reserve(sh, chunk + 1);
		for (Size i = 0; i < chunk; i++)
		{
			unsigned char c = ascii_table[s[i]];

			if (c == ' ')
				end_token(sh);
			else
				token_byte(sh, (char) c);
		}
		s += chunk;
		n -= chunk;
	}
}

/* Step 3 for one code point of normalised, case-folded text */
static inline void
read_folded(Shingler *sh, pg_wchar cp)
{
	unsigned char utf8[4];
	int			n;
	int			kind;

	if (cp < 0x80)
	{
		unsigned char c = ascii_table[cp];

		if (c == ' ')
			end_token(sh);
		else
			token_byte(sh, (char) c);
		return;
	}
	kind = range_kind(word_table, lengthof(word_table), cp);
	if (kind == 0)
	{
		end_token(sh);
		return;
	}
	if (kind == WORD_SOLO)
		end_token(sh);
	unicode_to_utf8(cp, utf8);
	n = pg_utf_mblen(utf8);
	for (int i = 0; i < n; i++)
		token_byte(sh, (char) utf8[i]);
	if (kind == WORD_SOLO)
		end_token(sh);
}

/*
 * Steps 1 to 3 for any text: the pinned Unicode version, NFKC, case folding
 * (not normalised again, like str.casefold()) and word characters.
 */
static void
read_general(Shingler *sh, const unsigned char *s, Size n)
{
	const unsigned char *end = s + n;
	Size		count = 0;
	pg_wchar   *wchars;
	pg_wchar   *normalised;

	if (n + 1 > sh->wchars_cap)
	{
		if (sh->wchars != NULL)
			pfree(sh->wchars);
		sh->wchars_cap = Max(n + 1, 1024);
		sh->wchars = MemoryContextAllocHuge(CurrentMemoryContext,
											sh->wchars_cap * sizeof(pg_wchar));
	}
	wchars = sh->wchars;

	while (s < end)
	{
		pg_wchar	cp;

		if (*s < 0x80)
			cp = *s++;
		else
		{
			int			kind;

			cp = utf8_to_unicode(s);
			s += pg_utf_mblen(s);
			kind = range_kind(pinned_table, lengthof(pinned_table), cp);
			if (kind == PINNED_IGNORABLE)
				continue;
			if (kind == PINNED_UNASSIGNED)
				cp = ' ';
		}
		wchars[count++] = cp;
	}
	wchars[count] = 0;

	normalised = unicode_normalize(UNICODE_NFKC, wchars);
	for (pg_wchar *p = normalised; *p != 0; p++)
	{
		const CaseFolding *folding = *p < 0x80 ? NULL : casefold_lookup(*p);

		/* up to CASEFOLD_MAX code points of 4 bytes, a space around each */
		reserve(sh, 6 * CASEFOLD_MAX);
		if (folding == NULL)
			read_folded(sh, *p);
		else
			for (int i = 0; i < CASEFOLD_MAX && folding->folded[i] != 0; i++)
				read_folded(sh, folding->folded[i]);
	}
	pfree(normalised);
}

/*
 * Steps 1 to 3 for one piece.  Texts with few non-ASCII characters (curly
 * quotes in English) take the general steps only for the stretches between
 * ASCII whitespace that hold them; cuts there change nothing (see
 * next_piece).
 */
static void
read_piece(Shingler *sh, const unsigned char *s, Size n)
{
	Size		non_ascii = 0;
	Size		done = 0;

	for (Size i = 0; i < n; i++)
		non_ascii += s[i] >> 7;
	if (non_ascii == 0)
	{
		read_ascii(sh, s, n);
		return;
	}
	if (non_ascii > n / 32)
	{
		read_general(sh, s, n);
		return;
	}
	while (done < n)
	{
		Size		found = done;
		Size		start;
		Size		end;

		while (found < n && s[found] < 0x80)
			found++;
		if (found == n)
		{
			read_ascii(sh, s + done, n - done);
			break;
		}
		start = found;
		while (start > done && !is_ascii_space(s[start - 1]))
			start--;
		if (start > done)
			start--;			/* cut before the whitespace */
		end = found;
		while (end < n && !is_ascii_space(s[end]))
			end++;
		read_ascii(sh, s + done, start - done);
		read_general(sh, s + start, end - start);
		done = end;
	}
}

/*
 * Where the piece that starts at offset start of s should end.  A cut
 * before ASCII whitespace or before any ASCII character changes neither
 * normalisation nor tokens (no ASCII character composes with what comes
 * before it); nor does a cut before a code point of boundary_table.  A
 * token cut in two goes on in the next piece.
 */
static Size
next_piece(const unsigned char *s, Size start, Size len)
{
	Size		limit;

	if (len - start <= PIECE_BYTES)
		return len;
	limit = start + PIECE_BYTES;
	for (Size i = limit; i < len && i < limit + PIECE_BYTES; i++)
		if (is_ascii_space(s[i]))
			return i;
	for (Size i = limit; i < len; i++)
	{
		if (s[i] < 0x80)
			return i;
		if ((s[i] & 0xC0) != 0x80 &&
			range_kind(boundary_table, lengthof(boundary_table), utf8_to_unicode(s + i)))
			return i;
	}
	return len;
}

/*
 * The fingerprint of UTF-8 text s of len bytes; false when it has no
 * tokens.  Memory: a piece of the text in code points (twice: normalised),
 * and the buffer.
 */
static bool
fingerprint_utf8(const unsigned char *s, Size len, uint64 *result)
{
	Shingler	sh;
	Size		start = 0;
	uint64		value = 0;

	memset(&sh, 0, sizeof(sh));
	sh.cap = Min(len, PIECE_BYTES) + 1;
	sh.buf = palloc(sh.cap);

	while (start < len)
	{
		Size		end = next_piece(s, start, len);

		read_piece(&sh, s + start, end - start);
		start = end;
	}
	reserve(&sh, 1);
	end_token(&sh);

	if (sh.tokens >= SHINGLE_WORDS)
	{
		/* more than half of the features (ties give 0) */
		vote_flush(&sh);
		for (int i = 0; i < FINGERPRINT_BITS; i++)
			if (sh.counts[i] > sh.total / 2)
				value |= UINT64CONST(1) << i;
	}
	else if (sh.tokens > 0)
	{
		/* one feature: the one or two tokens, without the last space */
		Size		first = sh.tokens == 2 ? sh.starts[0] : sh.starts[1];

		value = XXH64(sh.buf + first, sh.len - 1 - first, 0);
	}

	pfree(sh.buf);
	if (sh.wchars != NULL)
		pfree(sh.wchars);
	*result = value;
	return sh.tokens > 0;
}

PG_FUNCTION_INFO_V1(nearsim_simhash);
/*
 * simhash(text): the fingerprint of profile default/1, NULL for a text
 * without words.  Other database encodings are converted to UTF-8 first,
 * as PL/Python gives the reference a decoded str.
 */
Datum
nearsim_simhash(PG_FUNCTION_ARGS)
{
	text	   *document = PG_GETARG_TEXT_PP(0);
	const char *data = VARDATA_ANY(document);
	int			len = VARSIZE_ANY_EXHDR(document);
	const char *utf8 = data;
	uint64		value;
	bool		found;

	if (GetDatabaseEncoding() == PG_SQL_ASCII)
		(void) pg_verify_mbstr(PG_UTF8, data, len, false);
	else if (GetDatabaseEncoding() != PG_UTF8)
	{
		utf8 = pg_server_to_any(data, len, PG_UTF8);
		if (utf8 != data)
			len = strlen(utf8);
	}

	found = fingerprint_utf8((const unsigned char *) utf8, len, &value);

	if (utf8 != data)
		pfree((char *) utf8);
	PG_FREE_IF_COPY(document, 0);
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_INT64((int64) value);
}
