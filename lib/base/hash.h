/*
 * hash.h - the one hash function of the tables kept in memory (relations by
 * name, held rows by key, changes per row, prepared statements by
 * signature): 64-bit FNV-1a, fed in pieces. Not for anything stored or sent:
 * its values may change with any release.
 */
#ifndef PGSYNC_HASH_H
#define PGSYNC_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_INIT 1469598103934665603ULL

/* h with the bytes p[0..n) mixed in; start from HASH_INIT. */
static inline uint64_t
hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ULL;
	return h;
}

/*
 * The end of one of several values: a step no byte can make, so that
 * ("ab", "c") and ("a", "bc") hash apart.
 */
static inline uint64_t
hash_value_end(uint64_t h)
{
	return (h ^ 0x100) * 1099511628211ULL;
}

#endif
