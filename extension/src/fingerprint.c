#include "postgres.h"

#include "common/unicode_norm.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* xxHash compiled into this module: no library needed at run time */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "nearsim.h"
#include "unicode14_tables.h"

/*
 * The fingerprint of profile default/1 (see python_client/nearsim/
 * fingerprint.py, the reference it must equal bit for bit).  It is one file,
 * over 800 lines, as its reference is one module: the steps below read side
 * by side with the Python's, and the golden vectors test them together.
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
 * normalisation needs memory for one piece at a time.  Within a piece, only
 * the stretches around code points that NFKC may change or join to their
 * neighbours are normalised; code points below U+10000 (Latin, Greek,
 * Cyrillic, CJK, kana, Hangul, Thai...) are classified by a direct table
 * built from the range tables.  The tokens go into a
 * buffer that keeps only the last two tokens and the one being read, so a
 * shingle may span pieces.  ASCII text is read 64 bytes at a time: a bit
 * mask marks its word characters while its letters are lower-cased, and
 * each token is copied in one go.  Shingles are hashed in batches of one
 * length, so that the branches of xxh64, which depend on the length, are
 * predicted right; their bits are counted 16 hashes at a time.
 */

/* Pieces of about this many bytes are normalised at a time */
#define PIECE_BYTES (1 << 20)
/* ASCII stretches are read this many bytes at a time */
#define ASCII_CHUNK (1 << 16)
/* ASCII text is classified this many bytes at a time (the bits of a uint64) */
#define BLOCK_BYTES 64
/* A token copy may read and write up to this many bytes past the token */
#define COPY_SLACK 16
/* xxh64 hashes inputs shorter than this without its 32-byte stripes */
#define SHORT_SHINGLE 32
/* Short shingles of one length that wait to be hashed, at most (even) */
#define WAITING_SLOTS 64
/* Hashes that wait to be counted, at most */
#define HASH_SLOTS 1024
/* Number of tokens in a shingle */
#define SHINGLE_WORDS 3
/* A nibble counts up to 15 hashes, a byte up to 255 (17 times 15) */
#define NIBBLE_LIMIT 15
#define BYTE_LIMIT 255
#define EVERY_NIBBLES_LOW_BIT UINT64CONST(0x1111111111111111)
#define EVERY_BYTES_LOW_NIBBLE UINT64CONST(0x0F0F0F0F0F0F0F0F)

/*
 * The features: short shingles waiting to be hashed with others of their
 * length, hashes waiting to be counted, and the counts.
 */
typedef struct Votes
{
	/* waiting[n]: offsets in the buffer (< 4 GB) of shingles of n bytes */
	uint32		waiting[SHORT_SHINGLE][WAITING_SLOTS];
	int			waiting_count[SHORT_SHINGLE];
	uint64		hashes[HASH_SLOTS];
	int			hashed;
	uint64		counts[FINGERPRINT_BITS];	/* features with bit i set */
	uint64		total;			/* features */
	/* when collecting, every hash (with repeats) instead of counts */
	uint64	   *collected;
	Size		collected_cap;
} Votes;

/* hash_waiting pairs an odd last shingle with itself in the next slot */
StaticAssertDecl(WAITING_SLOTS % 2 == 0, "WAITING_SLOTS must be even");

/*
 * Tokens.  buf holds the tokens read so far, each followed by one space,
 * from the oldest one still needed; a shingle is the bytes from the start
 * of a token to the end of the token two further on.
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
	bool		keep_all;		/* keep every token in buf (for S_L) */
	bool		clusters;		/* tokenisation 2: WORD_CLUSTERED letters start tokens */
	bool		in_cluster;		/* the token being read started with such a letter */
	Votes	   *votes;
	/* a chunk of ASCII text lower-cased, for the ASCII steps */
	char	   *lowered;
	Size		lowered_cap;
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

/*
 * What the range tables say of each code point below U+10000, gathered
 * into one byte each when a backend first reads a text: a character would
 * otherwise take three binary searches (boundary, word, case folding) and
 * more time than the rest of its steps together.  64 kB, built from the
 * generated tables, so they remain the one source.
 */
#define BMP_CODE_POINTS 0x10000
#define BMP_BOUNDARY 0x01
#define BMP_FOLDS 0x02
#define BMP_WORD_SHIFT 2		/* 3 bits: the kind in word_table */
#define BMP_PINNED_SHIFT 5		/* 2 bits: the kind in pinned_table */

static uint8 bmp_table[BMP_CODE_POINTS];
static bool bmp_table_ready = false;

/*
 * Marks in bmp_table the code points below U+10000 of a range table: with
 * flag when it is not 0, else with the range's kind shifted left by shift
 */
static void
mark_ranges(const UnicodeRange *table, int n, uint8 flag, int shift)
{
	for (int i = 0; i < n && table[i].first < BMP_CODE_POINTS; i++)
	{
		uint8		bits = flag != 0 ? flag : (uint8) (table[i].kind << shift);

		for (pg_wchar cp = table[i].first; cp <= Min(table[i].last, BMP_CODE_POINTS - 1); cp++)
			bmp_table[cp] |= bits;
	}
}

/* Builds bmp_table once per backend */
static void
ensure_bmp_table(void)
{
	StaticAssertStmt(WORD_MARK < 8 && PINNED_UNASSIGNED < 4, "kinds fit their bits");
	if (bmp_table_ready)
		return;
	memset(bmp_table, 0, sizeof(bmp_table));
	mark_ranges(boundary_table, lengthof(boundary_table), BMP_BOUNDARY, 0);
	mark_ranges(word_table, lengthof(word_table), 0, BMP_WORD_SHIFT);
	mark_ranges(pinned_table, lengthof(pinned_table), 0, BMP_PINNED_SHIFT);
	for (Size i = 0; i < lengthof(casefold_table) && casefold_table[i].code < BMP_CODE_POINTS; i++)
		bmp_table[casefold_table[i].code] |= BMP_FOLDS;
	bmp_table_ready = true;
}

/* Whether a text may be cut before cp (see next_piece): boundary_table */
static inline bool
is_boundary(pg_wchar cp)
{
	if (cp < BMP_CODE_POINTS)
		return (bmp_table[cp] & BMP_BOUNDARY) != 0;
	return range_kind(boundary_table, lengthof(boundary_table), cp) != 0;
}

/* The kind of cp (not a boundary) in pinned_table */
static inline int
pinned_kind(pg_wchar cp)
{
	if (cp < BMP_CODE_POINTS)
		return (bmp_table[cp] >> BMP_PINNED_SHIFT) & 0x3;
	return range_kind(pinned_table, lengthof(pinned_table), cp);
}

/*
 * Refuse a text with more than MAX_UNSTABLE_RUN code points in a row that
 * are not in boundary_table: normalising such a run may take time that grows
 * with its square, in unicode_normalize(), which cannot be interrupted.
 * nearsim.core.text refuses the same texts.
 */
static void
check_unstable_run(Size run)
{
	if (run > MAX_UNSTABLE_RUN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the text has more than %d characters in a row that Unicode normalisation may reorder or join",
						MAX_UNSTABLE_RUN),
				 errhint("Such a run (combining marks, compatibility forms) is refused: normalising it takes time that grows with its square.")));
}

/*
 * The kind of cp in word_table: WORD_SOLO, 0, or a kind that joins
 * (WORD_JOINED, or WORD_CLUSTERED and WORD_MARK, which only tokenisation 2
 * tells apart)
 */
static inline int
word_kind(pg_wchar cp)
{
	if (cp < BMP_CODE_POINTS)
		return (bmp_table[cp] >> BMP_WORD_SHIFT) & 0x7;
	return range_kind(word_table, lengthof(word_table), cp);
}

/* The case folding of cp (not ASCII), or NULL when it is itself */
static inline const CaseFolding *
folding_of(pg_wchar cp)
{
	if (cp < BMP_CODE_POINTS && (bmp_table[cp] & BMP_FOLDS) == 0)
		return NULL;
	return casefold_lookup(cp);
}

/* The whitespace before which the reference cuts texts: [\t\n\v\f\r ] */
static inline bool
is_ascii_space(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The 8 bytes at p as a little-endian number */
static inline uint64
read_le64(const char *p)
{
	uint64		value;

	memcpy(&value, p, sizeof(value));
#ifdef WORDS_BIGENDIAN
	value = pg_bswap64(value);
#endif
	return value;
}

/* The 4 bytes at p as a little-endian number */
static inline uint32
read_le32(const char *p)
{
	uint32		value;

	memcpy(&value, p, sizeof(value));
#ifdef WORDS_BIGENDIAN
	value = pg_bswap32(value);
#endif
	return value;
}

/* xxh64's primes */
#define PRIME64_1 UINT64CONST(0x9E3779B185EBCA87)
#define PRIME64_2 UINT64CONST(0xC2B2AE3D27D4EB4F)
#define PRIME64_3 UINT64CONST(0x165667B19E3779F9)
#define PRIME64_4 UINT64CONST(0x85EBCA77C2B2AE63)
#define PRIME64_5 UINT64CONST(0x27D4EB2F165667C5)

/* byte * PRIME64_5 for every byte: a load instead of a multiplication */
#define TIMES5(b) ((uint64) (b) * PRIME64_5)
#define TIMES5_4(b) TIMES5(b), TIMES5((b) + 1), TIMES5((b) + 2), TIMES5((b) + 3)
#define TIMES5_16(b) TIMES5_4(b), TIMES5_4((b) + 4), TIMES5_4((b) + 8), TIMES5_4((b) + 12)
#define TIMES5_64(b) TIMES5_16(b), TIMES5_16((b) + 16), TIMES5_16((b) + 32), TIMES5_16((b) + 48)
static const uint64 byte_times_prime5[256] = {
	TIMES5_64(0), TIMES5_64(64), TIMES5_64(128), TIMES5_64(192)
};

/*
 * The steps of xxh64 (XXH64() of xxHash 0.8) for inputs shorter than 32
 * bytes: the state starts as seed (0) + PRIME64_5 + length, takes in 8
 * bytes at a time, then 4, then 1, and is mixed by the avalanche.  (Tests
 * compare shingles of every length with the reference.)
 */

/* The state after taking in the 8 bytes at p */
static inline uint64
xxh64_eight(uint64 hash, const char *p)
{
	hash ^= nearsim_rotate_left(read_le64(p) * PRIME64_2, 31) * PRIME64_1;
	return nearsim_rotate_left(hash, 27) * PRIME64_1 + PRIME64_4;
}

/* The state after taking in the 4 bytes at p */
static inline uint64
xxh64_four(uint64 hash, const char *p)
{
	hash ^= read_le32(p) * PRIME64_1;
	return nearsim_rotate_left(hash, 23) * PRIME64_2 + PRIME64_3;
}

/* The state after taking in one byte */
static inline uint64
xxh64_one(uint64 hash, char byte)
{
	hash ^= byte_times_prime5[(unsigned char) byte];
	return nearsim_rotate_left(hash, 11) * PRIME64_1;
}

/* The hash of the final state */
static inline uint64
xxh64_avalanche(uint64 hash)
{
	hash ^= hash >> 33;
	hash *= PRIME64_2;
	hash ^= hash >> 29;
	hash *= PRIME64_3;
	return hash ^ (hash >> 32);
}

/*
 * hashes[0] and hashes[1]: xxh64 with seed 0 of the length (< 32) bytes at
 * p and at q.  Side by side, the processor works on both at once: each
 * alone is a chain of multiplications, each waiting for the one before.
 */
static inline void
xxh64_short_pair(const char *p, const char *q, Size length, uint64 *hashes)
{
	uint64		hash_p = PRIME64_5 + length;
	uint64		hash_q = hash_p;

	for (; length >= 8; length -= 8, p += 8, q += 8)
	{
		hash_p = xxh64_eight(hash_p, p);
		hash_q = xxh64_eight(hash_q, q);
	}
	if (length >= 4)
	{
		hash_p = xxh64_four(hash_p, p);
		hash_q = xxh64_four(hash_q, q);
		length -= 4;
		p += 4;
		q += 4;
	}
	for (; length > 0; length--, p++, q++)
	{
		hash_p = xxh64_one(hash_p, *p);
		hash_q = xxh64_one(hash_q, *q);
	}
	hashes[0] = xxh64_avalanche(hash_p);
	hashes[1] = xxh64_avalanche(hash_q);
}

/*
 * Add weight times to counts[i] how many of the n words have bit i set.
 * Bits are added in parallel in the nibbles of 4 numbers (nibble j of
 * lanes[k] counts bit 4 * j + k) for up to 15 words, whose counts then go
 * to the bytes of 8 numbers (byte j of wide[k] counts bit 8 * j + k) for up
 * to 255 words: 3 operations per 16 bits instead of 3 per bit.
 */
static void
add_columns(uint64 *counts, const uint64 *words, int n, int weight)
{
	for (int group = 0; group < n; group += BYTE_LIMIT)
	{
		int			group_end = Min(n, group + BYTE_LIMIT);
		uint64		wide[8] = {0};

		for (int small = group; small < group_end; small += NIBBLE_LIMIT)
		{
			int			small_end = Min(group_end, small + NIBBLE_LIMIT);
			uint64		lanes[4] = {0};

			for (int i = small; i < small_end; i++)
			{
				lanes[0] += words[i] & EVERY_NIBBLES_LOW_BIT;
				lanes[1] += (words[i] >> 1) & EVERY_NIBBLES_LOW_BIT;
				lanes[2] += (words[i] >> 2) & EVERY_NIBBLES_LOW_BIT;
				lanes[3] += (words[i] >> 3) & EVERY_NIBBLES_LOW_BIT;
			}
			for (int k = 0; k < 4; k++)
			{
				wide[k] += lanes[k] & EVERY_BYTES_LOW_NIBBLE;
				wide[k + 4] += (lanes[k] >> 4) & EVERY_BYTES_LOW_NIBBLE;
			}
		}
		for (int k = 0; k < 8; k++)
			for (int j = 0; j < 8; j++)
				counts[8 * j + k] += weight * ((wide[k] >> (8 * j)) & 0xFF);
	}
}

/* a + b + c in each bit position: the carry bits and the sum bits */
static inline void
carry_save_add(uint64 *carry, uint64 *sum, uint64 a, uint64 b, uint64 c)
{
	uint64		a_xor_b = a ^ b;

	*carry = (a & b) | (a_xor_b & c);
	*sum = a_xor_b ^ c;
}

/*
 * Add to counts[i] how many of the n hashes have bit i set.  Carry-save
 * adders (Harley and Seal's method) add up 16 hashes at a time as 64
 * columns of bits: bit i of ones, twos, fours and eights are the binary
 * digits of column i's count so far, and each group of 16 gives one word
 * of sixteens, 5 operations per hash for all its 64 bits.  The words of
 * sixteens, and at the end the digits, go to add_columns.
 */
static void
count_bits(uint64 *counts, const uint64 *hashes, int n)
{
	uint64		ones = 0;
	uint64		twos = 0;
	uint64		fours = 0;
	uint64		eights = 0;
	uint64		sixteens[64];
	int			sixteens_count = 0;
	uint64		rest[15 + 15];	/* the last n % 16 hashes, and the digits */
	int			rest_count = 0;
	int			i = 0;

	for (; i + 16 <= n; i += 16)
	{
		const uint64 *h = hashes + i;
		uint64		twos_a;
		uint64		twos_b;
		uint64		fours_a;
		uint64		fours_b;
		uint64		eights_a;
		uint64		eights_b;

		carry_save_add(&twos_a, &ones, ones, h[0], h[1]);
		carry_save_add(&twos_b, &ones, ones, h[2], h[3]);
		carry_save_add(&fours_a, &twos, twos, twos_a, twos_b);
		carry_save_add(&twos_a, &ones, ones, h[4], h[5]);
		carry_save_add(&twos_b, &ones, ones, h[6], h[7]);
		carry_save_add(&fours_b, &twos, twos, twos_a, twos_b);
		carry_save_add(&eights_a, &fours, fours, fours_a, fours_b);
		carry_save_add(&twos_a, &ones, ones, h[8], h[9]);
		carry_save_add(&twos_b, &ones, ones, h[10], h[11]);
		carry_save_add(&fours_a, &twos, twos, twos_a, twos_b);
		carry_save_add(&twos_a, &ones, ones, h[12], h[13]);
		carry_save_add(&twos_b, &ones, ones, h[14], h[15]);
		carry_save_add(&fours_b, &twos, twos, twos_a, twos_b);
		carry_save_add(&eights_b, &fours, fours, fours_a, fours_b);
		carry_save_add(&sixteens[sixteens_count++], &eights, eights, eights_a, eights_b);
		if (sixteens_count == lengthof(sixteens))
		{
			add_columns(counts, sixteens, sixteens_count, 16);
			sixteens_count = 0;
		}
	}
	add_columns(counts, sixteens, sixteens_count, 16);

	/* each digit as many times as it weighs */
	for (; i < n; i++)
		rest[rest_count++] = hashes[i];
	for (int k = 0; k < 8; k++)
		rest[rest_count++] = eights;
	for (int k = 0; k < 4; k++)
		rest[rest_count++] = fours;
	for (int k = 0; k < 2; k++)
		rest[rest_count++] = twos;
	rest[rest_count++] = ones;
	add_columns(counts, rest, rest_count, 1);
}

/* Count the bits of the waiting hashes */
static void
count_hashes(Votes *votes)
{
	if (votes->collected != NULL)
	{
		if (votes->total + votes->hashed > votes->collected_cap)
		{
			votes->collected_cap = Max(votes->collected_cap * 2,
									   votes->total + votes->hashed);
			votes->collected = repalloc_huge(votes->collected,
											 votes->collected_cap * sizeof(uint64));
		}
		memcpy(votes->collected + votes->total, votes->hashes,
			   votes->hashed * sizeof(uint64));
	}
	else
		count_bits(votes->counts, votes->hashes, votes->hashed);
	votes->total += votes->hashed;
	votes->hashed = 0;
}

/*
 * Hash the waiting shingles of length bytes, two at a time.  They all take
 * the same branches through xxh64, which shingles of mixed lengths would
 * mispredict about twice a hash.
 */
static void
hash_waiting(Votes *votes, const char *buf, int length)
{
	uint32	   *starts = votes->waiting[length];
	int			n = votes->waiting_count[length];
	uint64	   *hashes;

	if (votes->hashed + n + 1 > HASH_SLOTS)
		count_hashes(votes);
	hashes = votes->hashes + votes->hashed;
	if (n % 2 == 1)
		starts[n] = starts[n - 1];	/* the last is hashed twice, counted once */
	for (int i = 0; i < n; i += 2)
		xxh64_short_pair(buf + starts[i], buf + starts[i + 1], length, hashes + i);
	votes->hashed += n;
	votes->waiting_count[length] = 0;
}

/* Hash every waiting shingle and count every hash (before buf changes) */
static void
vote_all(Votes *votes, const char *buf)
{
	for (int length = 0; length < SHORT_SHINGLE; length++)
		if (votes->waiting_count[length] > 0)
			hash_waiting(votes, buf, length);
	count_hashes(votes);
}

/* Vote for the shingle of length bytes at offset start of buf, soon */
static inline void
add_shingle(Votes *votes, const char *buf, Size start, Size length)
{
	if (length < SHORT_SHINGLE)
	{
		int			count = votes->waiting_count[length];

		votes->waiting[length][count] = (uint32) start;
		votes->waiting_count[length] = count + 1;
		if (count + 1 == WAITING_SLOTS)
			hash_waiting(votes, buf, (int) length);
	}
	else
	{
		if (votes->hashed == HASH_SLOTS)
			count_hashes(votes);
		votes->hashes[votes->hashed++] = XXH64(buf + start, length, 0);
	}
}

/*
 * Make room for n more bytes in the buffer: first drop the tokens no
 * shingle needs any more, then grow it (beyond 1 GB only for a huge token).
 */
static pg_noinline void
make_room(Shingler *sh, Size n)
{
	Size		keep;

	if (sh->keep_all)
		keep = 0;
	else if (sh->tokens >= 2)
		keep = sh->starts[0];
	else if (sh->tokens == 1)
		keep = sh->starts[1];
	else
		keep = sh->in_token ? sh->token_start : sh->len;
	if (keep > 0)
	{
		vote_all(sh->votes, sh->buf);	/* their offsets are to change */
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

/* Makes room for n more bytes in the buffer, when there is not */
static inline void
reserve(Shingler *sh, Size n)
{
	if (sh->len + n > sh->cap)
		make_room(sh, n);
}

/*
 * The token being read (the bytes from token_start) is complete: vote for
 * the shingle it ends, and follow it with a space (room reserved with its
 * last byte).
 */
static inline void
finish_token(Shingler *sh)
{
	if (sh->tokens >= SHINGLE_WORDS - 1)
		add_shingle(sh->votes, sh->buf, sh->starts[0], sh->len - sh->starts[0]);
	sh->buf[sh->len++] = ' ';
	sh->starts[0] = sh->starts[1];
	sh->starts[1] = sh->token_start;
	sh->tokens++;
	sh->in_token = false;
	sh->in_cluster = false;
}

/* End the token being read, if any */
static inline void
end_token(Shingler *sh)
{
	if (sh->in_token)
		finish_token(sh);
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

/*
 * Bit i set iff ASCII byte s[i] (i < 64) is a word character: a letter, a
 * digit or '_', the bytes that ascii_table keeps (tests check every ASCII
 * character against the reference).  The 64 bytes go to lowered with
 * their letters lower-cased, ready to be copied token by token.
 */
static inline uint64
word_mask(const unsigned char *s, char *lowered)
{
	uint64		mask = 0;

#ifdef __SSE2__
	/* ASCII bytes are positive as signed chars: signed compares do */
	const __m128i before_digits = _mm_set1_epi8('0' - 1);
	const __m128i after_digits = _mm_set1_epi8('9' + 1);
	const __m128i case_bit = _mm_set1_epi8(0x20);
	const __m128i before_letters = _mm_set1_epi8('a' - 1);
	const __m128i after_letters = _mm_set1_epi8('z' + 1);
	const __m128i underscore = _mm_set1_epi8('_');

	for (int i = 0; i < BLOCK_BYTES / 16; i++)
	{
		__m128i		v = _mm_loadu_si128((const __m128i *) (s + 16 * i));
		__m128i		folded = _mm_or_si128(v, case_bit);	/* A-Z to a-z */
		__m128i		digit = _mm_and_si128(_mm_cmpgt_epi8(v, before_digits),
										  _mm_cmplt_epi8(v, after_digits));
		__m128i		letter = _mm_and_si128(_mm_cmpgt_epi8(folded, before_letters),
										   _mm_cmplt_epi8(folded, after_letters));
		__m128i		word = _mm_or_si128(_mm_or_si128(digit, letter),
										_mm_cmpeq_epi8(v, underscore));

		_mm_storeu_si128((__m128i *) (lowered + 16 * i),
						 _mm_or_si128(v, _mm_and_si128(letter, case_bit)));
		mask |= (uint64) (uint16) _mm_movemask_epi8(word) << (16 * i);
	}
#else
	for (int i = 0; i < BLOCK_BYTES; i++)
	{
		lowered[i] = (char) ascii_table[s[i]];
		mask |= (uint64) (lowered[i] != ' ') << i;
	}
#endif
	return mask;
}

/*
 * Copy the n bytes of a token from lowered to out, 16 bytes at a time: up
 * to 15 bytes past the token are read and written (garbage for the caller
 * to overwrite).
 */
static inline void
copy_token(char *out, const char *lowered, Size n)
{
	for (Size i = 0; i < n; i += COPY_SLACK)
		memcpy(out + i, lowered + i, COPY_SLACK);
}

/*
 * Steps 1 to 3 for a chunk of ASCII text, s to s + n (room reserved in buf
 * and lowered): ASCII needs no normalisation, case folding lower-cases
 * letters, and the tokens are the runs of word characters.  A block's word
 * mask gives where tokens start (a word byte after another byte) and end
 * (another byte after a word byte); their bytes are copied from the
 * lower-cased chunk.  The state of the Shingler is kept in locals, which
 * the stores to buf cannot change.
 */
static void
read_ascii_chunk(Shingler *sh, const unsigned char *s, Size n)
{
	char	   *buf = sh->buf;
	char	   *lowered = sh->lowered;
	Size		len = sh->len;
	Size		older = sh->starts[0];
	Size		newer = sh->starts[1];
	Size		token_start = sh->token_start;
	uint64		tokens = sh->tokens;
	bool		in_token = sh->in_token;
	Size		token_from = 0; /* uncopied bytes of the token being read */
	uint64		before = in_token ? 1 : 0;	/* the byte before a block */

	for (Size block = 0; block < n; block += BLOCK_BYTES)
	{
		Size		size = Min(n - block, BLOCK_BYTES);
		uint64		word;
		uint64		after_word;
		uint64		starts;
		uint64		ends;

		if (size == BLOCK_BYTES)
			word = word_mask(s + block, lowered + block);
		else
		{
			unsigned char last[BLOCK_BYTES] = {0};	/* NUL: not a word */

			memcpy(last, s + block, size);
			word = word_mask(last, lowered + block);
		}
		after_word = (word << 1) | before;
		starts = word & ~after_word;
		ends = ~word & after_word;
		if (size < BLOCK_BYTES)
			ends &= (UINT64CONST(1) << size) - 1;	/* not past the text */
		before = (word >> (size - 1)) & 1;

		/* starts and ends alternate, beginning with an end in a token */
		for (;;)
		{
			Size		token_end;

			if (!in_token)
			{
				if (starts == 0)
					break;
				token_from = block + pg_rightmost_one_pos64(starts);
				starts &= starts - 1;
				token_start = len;
				in_token = true;
			}
			if (ends == 0)
				break;
			token_end = block + pg_rightmost_one_pos64(ends);
			ends &= ends - 1;
			copy_token(buf + len, lowered + token_from, token_end - token_from);
			len += token_end - token_from;

			/* as finish_token */
			if (tokens >= SHINGLE_WORDS - 1)
				add_shingle(sh->votes, buf, older, len - older);
			buf[len++] = ' ';
			older = newer;
			newer = token_start;
			tokens++;
			in_token = false;
		}
	}
	/* a token that goes on after the chunk: its bytes so far */
	if (in_token)
	{
		copy_token(buf + len, lowered + token_from, n - token_from);
		len += n - token_from;
	}

	sh->len = len;
	sh->starts[0] = older;
	sh->starts[1] = newer;
	sh->token_start = token_start;
	sh->tokens = tokens;
	sh->in_token = in_token;
}

/* Steps 1 to 3 for ASCII text, a chunk at a time */
static void
read_ascii(Shingler *sh, const unsigned char *s, Size n)
{
	/* the chunk in whole blocks, and what copy_token reads past a token */
	Size		lowered_cap = TYPEALIGN(BLOCK_BYTES, Min(n, ASCII_CHUNK)) + COPY_SLACK;

	if (lowered_cap > sh->lowered_cap)
	{
		if (sh->lowered != NULL)
			pfree(sh->lowered);
		sh->lowered = palloc(lowered_cap);
		sh->lowered_cap = lowered_cap;
	}
	/* an ASCII character is no mark: it ends a letter's token either way */
	if (sh->in_cluster)
		end_token(sh);
	for (Size done = 0; done < n; done += ASCII_CHUNK)
	{
		Size		chunk = Min(n - done, ASCII_CHUNK);

		/* a byte, or a space after a token, for each byte, and the slack */
		reserve(sh, chunk + 1 + COPY_SLACK);
		read_ascii_chunk(sh, s + done, chunk);
	}
}

/* Step 3 for one code point of normalised, case-folded text */
static inline void
read_folded(Shingler *sh, pg_wchar cp)
{
	int			kind;

	if (cp < 0x80)
	{
		unsigned char c = ascii_table[cp];

		if (c == ' ' || sh->in_cluster)
			end_token(sh);
		if (c != ' ')
			token_byte(sh, (char) c);
		return;
	}
	kind = word_kind(cp);
	if (kind == 0)
	{
		end_token(sh);
		return;
	}

	/*
	 * Tokenisation 2 (nearsim.core.text.clusters_apart): a letter of
	 * WORD_CLUSTERED starts a token, which only combining marks continue
	 */
	if (kind == WORD_SOLO ||
		(sh->clusters && (kind == WORD_CLUSTERED || (sh->in_cluster && kind != WORD_MARK))))
		end_token(sh);
	if (sh->clusters && kind == WORD_CLUSTERED)
		sh->in_cluster = true;	/* after end_token, which clears it */
	/* its UTF-8 bytes */
	if (cp < 0x800)
	{
		token_byte(sh, (char) (0xC0 | (cp >> 6)));
		token_byte(sh, (char) (0x80 | (cp & 0x3F)));
	}
	else if (cp < BMP_CODE_POINTS)
	{
		token_byte(sh, (char) (0xE0 | (cp >> 12)));
		token_byte(sh, (char) (0x80 | ((cp >> 6) & 0x3F)));
		token_byte(sh, (char) (0x80 | (cp & 0x3F)));
	}
	else
	{
		token_byte(sh, (char) (0xF0 | (cp >> 18)));
		token_byte(sh, (char) (0x80 | ((cp >> 12) & 0x3F)));
		token_byte(sh, (char) (0x80 | ((cp >> 6) & 0x3F)));
		token_byte(sh, (char) (0x80 | (cp & 0x3F)));
	}
	if (kind == WORD_SOLO)
		end_token(sh);
}

/* Marks a code point of a stretch that is not in boundary_table */
#define NOT_BOUNDARY ((pg_wchar) 0x80000000)

/* Steps 2 (case folding) and 3 for n code points in NFKC form */
static void
read_normalised(Shingler *sh, const pg_wchar *p, Size n)
{
	for (const pg_wchar *end = p + n; p < end; p++)
	{
		const CaseFolding *folding = *p < 0x80 ? NULL : folding_of(*p);

		/* up to CASEFOLD_MAX code points of 4 bytes, a space around each */
		reserve(sh, 6 * CASEFOLD_MAX);
		if (folding == NULL)
			read_folded(sh, *p);
		else
			for (int i = 0; i < CASEFOLD_MAX && folding->folded[i] != 0; i++)
				read_folded(sh, folding->folded[i]);
	}
}

/*
 * Steps 1 to 3 for any text: the pinned Unicode version, NFKC, case folding
 * (not normalised again, like str.casefold()) and word characters.
 *
 * A cut before a code point of boundary_table (or ASCII) changes nothing
 * (see next_piece), and such code points are their own NFKC.  So only the
 * stretches from the last of them before a code point that is not one to
 * the next after it are normalised; the rest is read as it is.
 */
static void
read_general(Shingler *sh, const unsigned char *s, Size n)
{
	const unsigned char *end = s + n;
	Size		count = 0;
	Size		done = 0;
	Size		unstable = 0;	/* code points in a row not in boundary_table */
	pg_wchar   *wchars;

	if (n + 1 > sh->wchars_cap)
	{
		if (sh->wchars != NULL)
			pfree(sh->wchars);
		sh->wchars_cap = Max(n + 1, 1024);
		sh->wchars = MemoryContextAllocHuge(CurrentMemoryContext,
											sh->wchars_cap * sizeof(pg_wchar));
	}
	wchars = sh->wchars;

	/* step 1, marking the code points that are not boundaries */
	while (s < end)
	{
		pg_wchar	cp;
		int			kind;

		if (*s < 0x80)
		{
			wchars[count++] = *s++;
			unstable = 0;
			continue;
		}
		/* PostgreSQL has checked the encoding: the bytes after the first are there */
		if ((*s & 0xE0) == 0xC0)
		{
			cp = ((pg_wchar) (s[0] & 0x1F) << 6) | (s[1] & 0x3F);
			s += 2;
		}
		else if ((*s & 0xF0) == 0xE0)
		{
			cp = ((pg_wchar) (s[0] & 0x0F) << 12) | ((pg_wchar) (s[1] & 0x3F) << 6) | (s[2] & 0x3F);
			s += 3;
		}
		else
		{
			cp = utf8_to_unicode(s);
			s += pg_utf_mblen(s);
		}
		if (is_boundary(cp))
		{
			wchars[count++] = cp;
			unstable = 0;
			continue;
		}
		check_unstable_run(++unstable);
		kind = pinned_kind(cp);
		if (kind == PINNED_IGNORABLE)
			continue;
		wchars[count++] = kind == PINNED_UNASSIGNED ? ' ' : cp | NOT_BOUNDARY;
	}

	while (done < count)
	{
		Size		first = done;
		Size		start;
		Size		stop;
		Size		length;
		pg_wchar	after;
		pg_wchar   *normalised;

		while (first < count && !(wchars[first] & NOT_BOUNDARY))
			first++;
		if (first == count)
			break;
		/* from the boundary before it (or where this stretch began) */
		start = first;
		while (start > done && (wchars[start] & NOT_BOUNDARY))
			start--;
		/* to the next boundary */
		for (stop = first; stop < count && (wchars[stop] & NOT_BOUNDARY); stop++)
			wchars[stop] &= ~NOT_BOUNDARY;
		read_normalised(sh, wchars + done, start - done);
		after = wchars[stop];
		wchars[stop] = 0;
		normalised = unicode_normalize(UNICODE_NFKC, wchars + start);
		wchars[stop] = after;
		for (length = 0; normalised[length] != 0; length++)
			;
		read_normalised(sh, normalised, length);
		pfree(normalised);
		done = stop;
		/* a stretch is normalised in one call, which checks no interrupt */
		CHECK_FOR_INTERRUPTS();
	}
	read_normalised(sh, wchars + done, count - done);
}

/* Offset of the first non-ASCII byte of s (n when there is none) */
static Size
first_non_ascii(const unsigned char *s, Size n)
{
	Size		i = 0;

	/* 32 bytes at a time, as 4 words: is a high bit set in any? */
	for (; i + 32 <= n; i += 32)
	{
		const char *p = (const char *) s + i;

		if ((read_le64(p) | read_le64(p + 8) | read_le64(p + 16) | read_le64(p + 24)) &
			UINT64CONST(0x8080808080808080))
			break;
	}
	while (i < n && s[i] < 0x80)
		i++;
	return i;
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
	Size		first = first_non_ascii(s, n);
	Size		non_ascii = 0;
	Size		done = 0;

	if (first == n)
	{
		read_ascii(sh, s, n);
		return;
	}
	for (Size i = first; i < n; i++)
		non_ascii += s[i] >> 7;
	if (non_ascii > n / 32)
	{
		read_general(sh, s, n);
		return;
	}
	while (done < n)
	{
		Size		found = done + first_non_ascii(s + done, n - done);
		Size		start;
		Size		end;

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
	for (Size i = limit, run = 0; i < len; i++)
	{
		if (s[i] < 0x80)
			return i;
		if ((s[i] & 0xC0) != 0x80)
		{
			if (is_boundary(utf8_to_unicode(s + i)))
				return i;
			/* no cut in sight: the run this piece would end with is too long */
			check_unstable_run(++run);
		}
	}
	return len;
}

#define RADIX_SORT_NAME radix_sort_uint64
#define RADIX_SORT_ELEMENT uint64
#define RADIX_SORT_KEY(value) (value)
#define RADIX_SORT_BITS 64
#define RADIX_SORT_CHECK_INTERRUPTS
#define RADIX_SORT_SPREAD		/* shingle hashes */
#include "radix_sort.h"

/*
 * Read UTF-8 text s of len bytes into votes: counted, or collected when
 * votes->collected is set.  The number of tokens; *single is the hash of
 * the one feature of a text of one or two tokens.  Memory: a piece of the
 * text in code points (twice: normalised), and the buffer.
 */
static uint64
read_text(const unsigned char *s, Size len, int tokenisation, Votes *votes, uint64 *single,
		  char **kept, Size *kept_len)
{
	Shingler	sh;
	Size		start = 0;

	ensure_bmp_table();
	memset(&sh, 0, sizeof(sh));
	sh.votes = votes;
	sh.keep_all = kept != NULL;
	sh.clusters = tokenisation == 2;
	memset(votes->waiting_count, 0, sizeof(votes->waiting_count));
	votes->hashed = 0;
	memset(votes->counts, 0, sizeof(votes->counts));
	votes->total = 0;
	sh.cap = Min(len, 2 * ASCII_CHUNK) + 1 + COPY_SLACK;
	sh.buf = palloc(sh.cap);

	while (start < len)
	{
		Size		end = next_piece(s, start, len);

		read_piece(&sh, s + start, end - start);
		start = end;
		CHECK_FOR_INTERRUPTS();
	}
	reserve(&sh, 1);
	end_token(&sh);

	if (sh.tokens >= SHINGLE_WORDS)
		vote_all(votes, sh.buf);
	else if (sh.tokens > 0)
	{
		/* one feature: the one or two tokens, without the last space */
		Size		first = sh.tokens == 2 ? sh.starts[0] : sh.starts[1];

		*single = XXH64(sh.buf + first, sh.len - 1 - first, 0);
	}

	if (kept != NULL)
	{
		*kept = sh.buf;
		*kept_len = sh.len;
	}
	else
		pfree(sh.buf);
	if (sh.wchars != NULL)
		pfree(sh.wchars);
	if (sh.lowered != NULL)
		pfree(sh.lowered);
	return sh.tokens;
}

/*
 * The fingerprint of UTF-8 text s of len bytes, profile default/N for
 * tokenisation N; false when it has no tokens.
 */
static bool
fingerprint_utf8(const unsigned char *s, Size len, int tokenisation, uint64 *result)
{
	Votes		votes;
	uint64		single = 0;
	uint64		tokens;
	uint64		value = 0;

	votes.collected = NULL;
	tokens = read_text(s, len, tokenisation, &votes, &single, NULL, NULL);
	if (tokens >= SHINGLE_WORDS)
	{
		/* more than half of the features (ties give 0) */
		uint64		half = votes.total / 2;

		for (int i = 0; i < FINGERPRINT_BITS; i++)
			value |= (uint64) (votes.counts[i] > half) << i;
	}
	else
		value = single;
	*result = value;
	return tokens > 0;
}

/*
 * The distinct hashes of the word shingles of UTF-8 text s, ascending, in
 * *hashes (palloc'd, NULL when none); their number.  These are the
 * features of the default profile, so the hashes of the shingle sets of
 * nearsim.core.measures.word_shingles, on which S_R is defined.
 */
Size
nearsim_shingle_hashes_utf8(const unsigned char *s, Size len, int tokenisation, uint64 **hashes)
{
	Votes		votes;
	uint64		single = 0;
	uint64		tokens;
	Size		distinct = 0;

	votes.collected_cap = 64;
	votes.collected = palloc(votes.collected_cap * sizeof(uint64));
	tokens = read_text(s, len, tokenisation, &votes, &single, NULL, NULL);
	if (tokens > 0 && tokens < SHINGLE_WORDS)
	{
		votes.collected[0] = single;
		votes.total = 1;
	}
	radix_sort_uint64(votes.collected, votes.total, NULL);
	for (Size i = 0; i < votes.total; i++)
		if (i == 0 || votes.collected[i] != votes.collected[distinct - 1])
			votes.collected[distinct++] = votes.collected[i];
	if (distinct == 0)
	{
		pfree(votes.collected);
		votes.collected = NULL;
	}
	*hashes = votes.collected;
	return distinct;
}

/*
 * The tokens of UTF-8 text s of len bytes (steps 1 to 3), each followed by
 * one space, in *tokens (palloc'd, NULL when none), *bytes long; their
 * number.  The tokens of nearsim.core.text.tokens, on which S_L is defined.
 */
uint64
nearsim_tokens_utf8(const unsigned char *s, Size len, int tokenisation, char **tokens,
					Size *bytes)
{
	Votes	   *votes = palloc(sizeof(Votes));
	uint64		single = 0;
	uint64		count;

	votes->collected = NULL;
	count = read_text(s, len, tokenisation, votes, &single, tokens, bytes);
	pfree(votes);
	if (count == 0)
	{
		pfree(*tokens);
		*tokens = NULL;
		*bytes = 0;
	}
	return count;
}

/*
 * The tokenisation of a profile (a canonical name, spec/N): its version N,
 * 1 or 2; 0 for a version this nearsim does not compute (a table recorded
 * with one is refused where its fingerprints are computed or its texts
 * measured, and repaired by nearsim_rebuild)
 */
int
nearsim_profile_tokenisation(const char *profile)
{
	const char *slash = strrchr(profile, '/');
	int			version = slash == NULL ? 1 : atoi(slash + 1);

	return version == 1 || version == 2 ? version : 0;
}

/* Argument argno of a measure: a tokenisation, 1 or 2, else an error naming it */
int
nearsim_tokenisation_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		tokenisation = PG_GETARG_INT32(argno);

	if (tokenisation != 1 && tokenisation != 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenisation %d is unknown to this nearsim, which computes 1 and 2",
						tokenisation),
				 errhint("Tokenisation 2, that of profiles of version 2 (default/2...), makes each letter of Thai, Lao, Myanmar, Khmer... a word.")));
	return tokenisation;
}

/*
 * Text of the database, as UTF-8: data itself when the database is UTF-8
 * (or SQL_ASCII, checked to be valid UTF-8), else a converted copy.
 */
const char *
nearsim_utf8(const char *data, int *len)
{
	const char *utf8 = data;

	if (GetDatabaseEncoding() == PG_SQL_ASCII)
		(void) pg_verify_mbstr(PG_UTF8, data, *len, false);
	else if (GetDatabaseEncoding() != PG_UTF8)
	{
		utf8 = pg_server_to_any(data, *len, PG_UTF8);
		if (utf8 != data)
			*len = strlen(utf8);
	}
	return utf8;
}

/*
 * The fingerprint of a text datum with tokenisation N (profile default/N);
 * false when it has no tokens.  Other database encodings are converted to
 * UTF-8 first, as PL/Python gives the reference a decoded str.
 */
static bool
text_fingerprint(text *document, int tokenisation, uint64 *value)
{
	const char *data = VARDATA_ANY(document);
	int			len = VARSIZE_ANY_EXHDR(document);
	const char *utf8 = nearsim_utf8(data, &len);
	bool		found = fingerprint_utf8((const unsigned char *) utf8, len, tokenisation, value);

	if (utf8 != data)
		pfree((char *) utf8);
	return found;
}

/* Whether profile is the default one, default/1 or default/2: computed in C */
bool
nearsim_profile_in_c(const char *profile)
{
	return strcmp(profile, DEFAULT_PROFILE) == 0 || strcmp(profile, TOKENISATION_2_PROFILE) == 0;
}

PG_FUNCTION_INFO_V1(nearsim_simhash);
/*
 * simhash(text): the fingerprint of profile default/1, NULL for a text
 * without words.
 */
Datum
nearsim_simhash(PG_FUNCTION_ARGS)
{
	text	   *document = PG_GETARG_TEXT_PP(0);
	uint64		value;
	bool		found = text_fingerprint(document, 1, &value);

	PG_FREE_IF_COPY(document, 0);
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_INT64((int64) value);
}

PG_FUNCTION_INFO_V1(nearsim_simhash_profile);
/*
 * simhash(text, profile): profile default/2 in C, as simhash(text) computes
 * default/1; any other profile (default/1 too, the reference of
 * simhash(text)) by the Python code of the clients, in the PL/Python body.
 */
Datum
nearsim_simhash_profile(PG_FUNCTION_ARGS)
{
	uint64		value;

	if (strcmp(text_to_cstring(PG_GETARG_TEXT_PP(1)), TOKENISATION_2_PROFILE) != 0)
		return nearsim_call_python_body(fcinfo);
	if (!text_fingerprint(PG_GETARG_TEXT_PP(0), 2, &value))
		PG_RETURN_NULL();
	PG_RETURN_INT64((int64) value);
}
