#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "nearsim.h"

/*
 * S_L, literal similarity (seed 001): the words of the longer text that lie
 * in common chunks of at least w = 5 words, matched one to one, over the
 * words of the longer text.  The same numbers as
 * nearsim.core.measures.compare(a, b).s_l, step for step:
 *
 * 1. the tokens of both texts (fingerprint.c); the longer text first (on
 *    equal counts, the one whose tokens come later in code point order);
 * 2. words as integers in order of first occurrence, and equal w-word
 *    windows as equal integers (by hashing, with the words compared);
 * 3. every pair of equal windows of the two texts, sorted by diagonal and
 *    position, gives the maximal common runs.  Past PAIR_BUDGET pairs, the
 *    windows with the most pairs are paired by rank within a band, as the
 *    reference does, its ties broken by the windows' lexicographic order
 *    (the result may then fall short of the true maximum);
 * 4. greedy string tiling: the longest run not yet used becomes a chunk
 *    (ties: the earliest start in the first text, then in the second); a
 *    run partly used is cut into its free pieces of at least w words.
 *
 * Memory: a few words of 8 bytes per token of either text, plus the pairs
 * of equal windows (16 bytes each) and the runs they make (24 bytes each),
 * at most about PAIR_BUDGET of each: 80 MB for the most repetitive texts.
 */

/* Seed 001's w: a chunk has at least this many words */
#define MIN_CHUNK_WORDS 5
/* Pairs of equal windows listed in full, at most (measures._PAIR_BUDGET) */
#define PAIR_BUDGET ((int64) 1 << 21)
/* Steps between two interrupt checks */
#define CHECK_EVERY 4096

/* The tokens of one text: pointers into one buffer, lengths */
typedef struct Words
{
	char	   *buf;
	const char **token;
	int32	   *length;
	int64		count;
} Words;

/* A common run, or a piece of one: length words at a in the first text, b in the second */
typedef struct Run
{
	int64		length;
	int64		a;
	int64		b;
} Run;

/* A pair of equal windows */
typedef struct WindowPair
{
	int64		diagonal;
	int64		a;
} WindowPair;

static void
read_words(text *document, int tokenisation, Words *words)
{
	int			len = VARSIZE_ANY_EXHDR(document);
	const char *utf8 = nearsim_utf8(VARDATA_ANY(document), &len);
	Size		bytes = 0;
	Size		at = 0;

	words->count = (int64) nearsim_tokens_utf8((const unsigned char *) utf8, len, tokenisation,
											   &words->buf, &bytes);
	words->token = palloc_extended(Max(words->count, 1) * sizeof(char *), MCXT_ALLOC_HUGE);
	words->length = palloc_extended(Max(words->count, 1) * sizeof(int32), MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < words->count; i++)
	{
		Size		end = at;

		while (words->buf[end] != ' ')
			end++;
		words->token[i] = words->buf + at;
		words->length[i] = (int32) (end - at);
		at = end + 1;
	}
}

static void
let_go_words(Words *words)
{
	if (words->buf != NULL)
		pfree(words->buf);
	pfree(words->token);
	pfree(words->length);
}

/* Code point order of two tokens (UTF-8 byte order is code point order) */
static int
compare_tokens(const char *a, int32 na, const char *b, int32 nb)
{
	int			order = memcmp(a, b, Min(na, nb));

	if (order != 0)
		return order;
	return (na > nb) - (na < nb);
}

/* Whether text x comes before text y as Python orders (len(words), words) */
static bool
orders_before(const Words *x, const Words *y)
{
	if (x->count != y->count)
		return x->count < y->count;
	for (int64 i = 0; i < x->count; i++)
	{
		int			order = compare_tokens(x->token[i], x->length[i], y->token[i],
										   y->length[i]);

		if (order != 0)
			return order < 0;
	}
	return false;
}

/*
 * ids[i] for items 0 .. n - 1: equal items (by hash and equal) get equal
 * integers, numbered in order of first occurrence (as a dict's setdefault
 * numbers them); their number.  Open addressing over twice as many slots.
 */
static int64
number_by_first_occurrence(int64 n, uint64 (*hash) (int64 item, const void *arg),
						   bool (*equal) (int64 a, int64 b, const void *arg), const void *arg,
						   int64 *ids)
{
	uint64		size = 16;
	int64	   *slots;
	int64		next = 0;

	while (size < (uint64) n * 2)
		size *= 2;
	slots = palloc_extended(size * sizeof(int64), MCXT_ALLOC_HUGE);
	memset(slots, 0xff, size * sizeof(int64));	/* -1: empty */
	for (int64 i = 0; i < n; i++)
	{
		uint64		at = hash(i, arg) & (size - 1);

		for (;;)
		{
			if (slots[at] < 0)
			{
				slots[at] = i;
				ids[i] = next++;
				break;
			}
			if (equal(slots[at], i, arg))
			{
				ids[i] = ids[slots[at]];
				break;
			}
			at = (at + 1) & (size - 1);
		}
		if (i % (CHECK_EVERY * 16) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	pfree(slots);
	return next;
}

/* The tokens of both texts, the first's then the second's */
typedef struct BothTexts
{
	const Words *first;
	const Words *second;
} BothTexts;

static inline void
token_at(const BothTexts *both, int64 i, const char **token, int32 *length)
{
	const Words *words = i < both->first->count ? both->first : both->second;
	int64		at = i < both->first->count ? i : i - both->first->count;

	*token = words->token[at];
	*length = words->length[at];
}

static uint64
token_hash(int64 i, const void *arg)
{
	const char *token;
	int32		length;

	token_at(arg, i, &token, &length);
	return hash_bytes_extended((const unsigned char *) token, length, 0);
}

static bool
tokens_equal(int64 a, int64 b, const void *arg)
{
	const char *x;
	const char *y;
	int32		nx;
	int32		ny;

	token_at(arg, a, &x, &nx);
	token_at(arg, b, &y, &ny);
	return nx == ny && memcmp(x, y, nx) == 0;
}

/*
 * ids[i] for every token i of both texts: equal tokens get equal integers,
 * numbered in order of first occurrence.
 */
static int64 *
word_ids(const Words *first, const Words *second)
{
	BothTexts	both = {first, second};
	int64		n = first->count + second->count;
	int64	   *ids = palloc_extended(n * sizeof(int64), MCXT_ALLOC_HUGE);

	number_by_first_occurrence(n, token_hash, tokens_equal, &both, ids);
	return ids;
}

/* The windows of w words over ids, by their start */
typedef struct Windows
{
	const int64 *ids;
	int			w;
	int64		words_a;		/* windows of a start below this in ids */
	int64		count_a;		/* windows of a */
} Windows;

/* Where the window numbered i (a's, then b's) starts in ids */
static inline int64
window_start(const Windows *windows, int64 i)
{
	return i < windows->count_a ? i : windows->words_a + (i - windows->count_a);
}

static uint64
window_hash(int64 i, const void *arg)
{
	const Windows *windows = arg;

	return hash_bytes_extended((const unsigned char *) (windows->ids + window_start(windows, i)),
							   windows->w * sizeof(int64), 0);
}

static bool
windows_equal(int64 a, int64 b, const void *arg)
{
	const Windows *windows = arg;

	return memcmp(windows->ids + window_start(windows, a), windows->ids + window_start(windows, b),
				  windows->w * sizeof(int64)) == 0;
}

/* Windows compared word by word, for their lexicographic order */
static const Windows *sort_windows;

static int
by_window_words(const void *x, const void *y)
{
	const int64 *a = sort_windows->ids + window_start(sort_windows, *(const int64 *) x);
	const int64 *b = sort_windows->ids + window_start(sort_windows, *(const int64 *) y);

	for (int k = 0; k < sort_windows->w; k++)
		if (a[k] != b[k])
			return (a[k] > b[k]) - (a[k] < b[k]);
	return 0;
}

/*
 * rank[g] of each of the kinds of window: its place in the lexicographic
 * order of their words, the order np.unique numbers them in (which breaks
 * the ties of the reference between windows of as many pairs).
 */
static int64 *
lexicographic_ranks(const Windows *windows, const int64 *grams, int64 windows_total, int64 kinds)
{
	int64	   *first = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE);
	int64	   *rank = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE);
	int64		seen = 0;

	/* first occurrences come in the order of the kinds' numbers */
	for (int64 i = 0; i < windows_total && seen < kinds; i++)
		if (grams[i] == seen)
			first[seen++] = i;
	sort_windows = windows;
	qsort(first, kinds, sizeof(int64), by_window_words);
	for (int64 r = 0; r < kinds; r++)
		rank[grams[first[r]]] = r;
	pfree(first);
	return rank;
}

static int
by_diagonal_then_position(const void *x, const void *y)
{
	const WindowPair *a = x;
	const WindowPair *b = y;

	if (a->diagonal != b->diagonal)
		return (a->diagonal > b->diagonal) - (a->diagonal < b->diagonal);
	return (a->a > b->a) - (a->a < b->a);
}

/* The window kinds in order of their number of pairs, ties by their words */
static const int64 *sort_pairs_per_gram;
static const int64 *sort_rank;

static int
by_pairs_then_words(const void *x, const void *y)
{
	int64		i = *(const int64 *) x;
	int64		j = *(const int64 *) y;

	if (sort_pairs_per_gram[i] != sort_pairs_per_gram[j])
		return (sort_pairs_per_gram[i] > sort_pairs_per_gram[j])
			- (sort_pairs_per_gram[i] < sort_pairs_per_gram[j]);
	return (sort_rank[i] > sort_rank[j]) - (sort_rank[i] < sort_rank[j]);
}

/*
 * The maximal common runs of at least w words of texts a (na words) and b
 * (nb words), whose words are ids and ids + na, into *runs; their number.
 */
static int64
maximal_runs(const int64 *ids, int64 na, int64 nb, int w, Run **runs)
{
	int64		windows_a = na - w + 1;
	int64		windows_b = nb - w + 1;
	int64	   *grams = palloc_extended((windows_a + windows_b) * sizeof(int64),
										MCXT_ALLOC_HUGE);
	Windows		windows = {ids, w, na, windows_a};
	/* grams: a's windows, then b's; equal windows get equal numbers */
	int64		kinds = number_by_first_occurrence(windows_a + windows_b, window_hash,
												   windows_equal, &windows, grams);
	const int64 *grams_a = grams;
	const int64 *grams_b = grams + windows_a;
	int64	   *count_a = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	int64	   *count_b = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	int64	   *band = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE);
	int64	   *first_in_b = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE);
	int64	   *filled = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	int64	   *b_by_gram = palloc_extended(Max(windows_b, 1) * sizeof(int64), MCXT_ALLOC_HUGE);
	int64	   *seen_a = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	int64		all_pairs = 0;
	int64		total = 0;
	int64		at = 0;
	int64		found = 0;
	WindowPair *pairs;

	for (int64 i = 0; i < windows_a; i++)
		count_a[grams_a[i]]++;
	for (int64 j = 0; j < windows_b; j++)
		count_b[grams_b[j]]++;
	for (int64 g = 0; g < kinds; g++)
	{
		band[g] = -1;			/* every pair of the window */
		all_pairs += count_a[g] * count_b[g];
	}
	if (all_pairs > PAIR_BUDGET)
	{
		/* the windows with the fewest pairs keep them all, up to half the budget */
		int64	   *pairs_per_gram = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE);
		int64	   *fewest_first = palloc_extended(kinds * sizeof(int64), MCXT_ALLOC_HUGE);
		int64		sum = 0;
		int64		occurrences = 0;
		int64		width;
		int64		k = 0;

		for (int64 g = 0; g < kinds; g++)
		{
			pairs_per_gram[g] = count_a[g] * count_b[g];
			fewest_first[g] = g;
		}
		sort_pairs_per_gram = pairs_per_gram;
		sort_rank = lexicographic_ranks(&windows, grams, windows_a + windows_b, kinds);
		qsort(fewest_first, kinds, sizeof(int64), by_pairs_then_words);
		pfree((void *) sort_rank);
		for (; k < kinds; k++)
		{
			sum += pairs_per_gram[fewest_first[k]];
			if (sum > PAIR_BUDGET / 2)
				break;
		}
		/* the others pair each occurrence with its rank's neighbours */
		for (int64 rest = k; rest < kinds; rest++)
		{
			int64		g = fewest_first[rest];

			occurrences += Min(count_a[g], count_b[g]);
		}
		width = (PAIR_BUDGET / 2 / Max(occurrences, 1) - 1);
		width = width < 0 ? 0 : width / 2;
		for (int64 rest = k; rest < kinds; rest++)
			band[fewest_first[rest]] = width;
		pfree(pairs_per_gram);
		pfree(fewest_first);
	}

	/* the second text's windows grouped by kind, in order */
	for (int64 g = 0; g < kinds; g++)
	{
		first_in_b[g] = at;
		at += count_b[g];
	}
	for (int64 j = 0; j < windows_b; j++)
		b_by_gram[first_in_b[grams_b[j]] + filled[grams_b[j]]++] = j;

	/* the partners of each window of a: ranks lowest .. highest - 1 in b */
	for (int64 i = 0; i < windows_a; i++)
	{
		int64		g = grams_a[i];
		int64		rank = seen_a[g]++;
		int64		lowest = band[g] < 0 ? 0 : Max(rank - band[g], 0);
		int64		highest = band[g] < 0 ? count_b[g] : Min(rank + band[g] + 1, count_b[g]);

		total += Max(highest - lowest, 0);
	}
	pairs = palloc_extended(Max(total, 1) * sizeof(WindowPair), MCXT_ALLOC_HUGE);
	memset(seen_a, 0, kinds * sizeof(int64));
	at = 0;
	for (int64 i = 0; i < windows_a; i++)
	{
		int64		g = grams_a[i];
		int64		rank = seen_a[g]++;
		int64		lowest = band[g] < 0 ? 0 : Max(rank - band[g], 0);
		int64		highest = band[g] < 0 ? count_b[g] : Min(rank + band[g] + 1, count_b[g]);

		for (int64 r = lowest; r < highest; r++)
		{
			pairs[at].diagonal = b_by_gram[first_in_b[g] + r] - i;
			pairs[at].a = i;
			at++;
		}
		if (i % CHECK_EVERY == 0)
			CHECK_FOR_INTERRUPTS();
	}
	qsort(pairs, total, sizeof(WindowPair), by_diagonal_then_position);
	CHECK_FOR_INTERRUPTS();

	/* consecutive pairs on one diagonal make one run */
	*runs = palloc_extended(Max(total, 1) * sizeof(Run), MCXT_ALLOC_HUGE);
	for (int64 p = 0; p < total; p++)
	{
		if (p == 0 || pairs[p].diagonal != pairs[p - 1].diagonal
			|| pairs[p].a != pairs[p - 1].a + 1)
		{
			(*runs)[found].a = pairs[p].a;
			(*runs)[found].b = pairs[p].a + pairs[p].diagonal;
			(*runs)[found].length = w;
			found++;
		}
		else
			(*runs)[found - 1].length++;
	}
	pfree(pairs);
	pfree(grams);
	pfree(count_a);
	pfree(count_b);
	pfree(band);
	pfree(first_in_b);
	pfree(filled);
	pfree(b_by_gram);
	pfree(seen_a);
	return found;
}

/* Whether run x is taken before run y: longer, then earlier in a, then in b */
static inline bool
run_before(const Run *x, const Run *y)
{
	if (x->length != y->length)
		return x->length > y->length;
	if (x->a != y->a)
		return x->a < y->a;
	return x->b < y->b;
}

/* A binary heap of runs, the one taken first on top */
typedef struct RunHeap
{
	Run		   *runs;
	int64		count;
	int64		capacity;
} RunHeap;

static void
heap_push(RunHeap *heap, Run run)
{
	int64		i;

	if (heap->count == heap->capacity)
	{
		heap->capacity = Max(heap->capacity * 2, 16);
		heap->runs = repalloc_huge(heap->runs, heap->capacity * sizeof(Run));
	}
	i = heap->count++;
	while (i > 0 && run_before(&run, &heap->runs[(i - 1) / 2]))
	{
		heap->runs[i] = heap->runs[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	heap->runs[i] = run;
}

static Run
heap_pop(RunHeap *heap)
{
	Run			top = heap->runs[0];
	Run			last = heap->runs[--heap->count];
	int64		i = 0;

	for (;;)
	{
		int64		child = 2 * i + 1;

		if (child >= heap->count)
			break;
		if (child + 1 < heap->count && run_before(&heap->runs[child + 1], &heap->runs[child]))
			child++;
		if (!run_before(&heap->runs[child], &last))
			break;
		heap->runs[i] = heap->runs[child];
		i = child;
	}
	if (heap->count > 0)
		heap->runs[i] = last;
	return top;
}

/*
 * Greedy string tiling of the runs: the words of the first text (na words)
 * in chunks of at least w words, matched one to one.
 */
static int64
tiled_words(Run *runs, int64 count, int64 na, int64 nb, int w)
{
	RunHeap		heap = {runs, 0, Max(count, 1)};
	char	   *used_a = palloc_extended(Max(na, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	char	   *used_b = palloc_extended(Max(nb, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	int64		common = 0;
	int64		steps = 0;

	/* heapify in place: each run pushed over the ones before it */
	for (int64 i = 0; i < count; i++)
	{
		Run			run = runs[i];

		heap.count = i;
		heap_push(&heap, run);
	}
	heap.count = count;
	while (heap.count > 0)
	{
		Run			run = heap_pop(&heap);
		bool		untouched = true;
		int64		piece_start = -1;

		if (++steps % CHECK_EVERY == 0)
			CHECK_FOR_INTERRUPTS();
		for (int64 k = 0; k < run.length && untouched; k++)
			untouched = !used_a[run.a + k] && !used_b[run.b + k];
		if (untouched)
		{
			memset(used_a + run.a, 1, run.length);
			memset(used_b + run.b, 1, run.length);
			common += run.length;
			continue;
		}
		for (int64 k = 0; k <= run.length; k++)
		{
			bool		here = k < run.length && !used_a[run.a + k] && !used_b[run.b + k];

			if (here && piece_start < 0)
				piece_start = k;
			else if (!here && piece_start >= 0)
			{
				if (k - piece_start >= w)
				{
					Run			piece = {k - piece_start, run.a + piece_start,
					run.b + piece_start};

					heap_push(&heap, piece);
				}
				piece_start = -1;
			}
		}
	}
	pfree(used_a);
	pfree(used_b);
	pfree(heap.runs);
	return common;
}

/*
 * S_L of two texts under a tokenisation: the words of the longer in common
 * chunks over its words; 0.0 when either has none.
 */
double
nearsim_literal_of(text *a, text *b, int tokenisation)
{
	Words		words_a;
	Words		words_b;
	const Words *first;
	const Words *second;
	int64	   *ids;
	Run		   *runs;
	int64		count;
	int64		common;
	int64		longer;
	int			w;

	read_words(a, tokenisation, &words_a);
	read_words(b, tokenisation, &words_b);
	/* the longer first (compare's swap) */
	if (orders_before(&words_a, &words_b))
	{
		first = &words_b;
		second = &words_a;
	}
	else
	{
		first = &words_a;
		second = &words_b;
	}
	if (first->count == 0 || second->count == 0)
		common = 0;
	else
	{
		w = (int) Min(MIN_CHUNK_WORDS, second->count);
		ids = word_ids(first, second);
		CHECK_FOR_INTERRUPTS();
		count = maximal_runs(ids, first->count, second->count, w, &runs);
		common = tiled_words(runs, count, first->count, second->count, w);
		pfree(ids);
	}
	longer = first->count;
	let_go_words(&words_a);
	let_go_words(&words_b);
	return longer == 0 ? 0.0 : (double) common / (double) longer;
}

PG_FUNCTION_INFO_V1(nearsim_literal_similarity);
/*
 * nearsim_literal_similarity(a, b, tokenisation): S_L of two texts, as
 * nearsim_compare(a, b, tokenisation => ...).s_l (0 when either has no word).
 */
Datum
nearsim_literal_similarity(PG_FUNCTION_ARGS)
{
	int			tokenisation = nearsim_tokenisation_arg(fcinfo, 2);

	PG_RETURN_FLOAT8(nearsim_literal_of(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1),
										tokenisation));
}
