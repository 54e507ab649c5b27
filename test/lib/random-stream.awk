# random-stream.awk: a random change stream over one table (id int key,
# n int, doc text), for differential tests of pg-apply: inserts, updates
# that keep the key (with and without an unchanged TOAST marker for doc),
# key-changing updates, deletes and the odd truncate, in TXNS transactions.
#
#   awk -v seed=N -v table=T -v slot=S -v txns=N -v expect=FILE -f random-stream.awk
#
# Every change is valid against the stream's own history (no update of a
# missing row, no duplicate key), so applying it must succeed. FILE gets the
# final rows, "id|n|doc" (doc NULL as \N), one per line in no given order.
function pick(   i, k) {
	# A random existing key (nkeys > 0).
	i = int(rand() * nkeys) + 1
	return keys[i]
}
function add(k) { keys[++nkeys] = k; pos[k] = nkeys; live[k] = 1 }
function del(k,   i, last) {
	i = pos[k]; last = keys[nkeys]
	keys[i] = last; pos[last] = i
	delete keys[nkeys]; delete pos[k]; delete live[k]; nkeys--
	delete vn[k]; delete vd[k]
}
# Record the row's values; doc \U keeps what the row had.
function set(k, n, d) { vn[k] = n; if (d != "\\U") vd[k] = d }
function fresh(   k) {
	do k = int(rand() * 400) + 1; while (k in live)
	return k
}
function doc(   r) {
	r = rand()
	if (r < 0.4) return "\\U"
	if (r < 0.5) return "\\N"
	return "d" int(rand() * 100000)
}
BEGIN {
	srand(seed)
	T0 = "2026-11-30 14:03:07.123456+00"
	printf "PGCS\t1\t77\t1\t%s\t0/100\n", slot
	printf "RELATION\tpublic\t%s\t1\td\t3\tid\t23\t-1\tk\tn\t23\t-1\t-\tdoc\t25\t-1\t-\n", table
	lsn = 4096
	for (t = 1; t <= txns; t++) {
		printf "BEGIN\t%d\t0/%X\t%s\n", t, lsn, T0
		nops = int(rand() * 6) + 1
		for (o = 0; o < nops; o++) {
			r = rand()
			if (nkeys < 20 || r < 0.15) {
				k = fresh(); add(k)
				d = doc(); if (d == "\\U") d = "ins" k
				n = int(rand() * 1000); set(k, n, d)
				printf "INSERT\tpublic\t%s\t%d\t%d\t%s\n", table, k, n, d
			} else if (r < 0.75) {
				k = pick(); n = int(rand() * 1000); d = doc(); set(k, n, d)
				printf "UPDATE\tpublic\t%s\tN\t%d\t%d\t%s\n", table, k, n, d
			} else if (r < 0.85) {
				k = pick(); del(k)
				printf "DELETE\tpublic\t%s\tK\t%d\t\\N\t\\N\n", table, k
			} else if (r < 0.995) {
				k = pick(); k2 = fresh(); old = vd[k]; del(k); add(k2)
				n = int(rand() * 1000); d = doc(); vd[k2] = old; set(k2, n, d)
				printf "UPDATE\tpublic\t%s\tK\t%d\t\\N\t\\N\t%d\t%d\t%s\n", table, k, k2, n, d
			} else {
				printf "TRUNCATE\t-\tpublic\t%s\n", table
				for (k in live) del(k)
			}
		}
		printf "COMMIT\t%d\t0/%X\t0/%X\t%s\n", t, lsn, lsn + 16, T0
		lsn += 4096
	}
	for (k in live)
		printf "%d|%d|%s\n", k, vn[k], vd[k] > expect
}
