# Throwaway PostgreSQL clusters for bats tests, on top of scripts/pg-cluster.
#
#   load lib/cluster
#   setup_file()    { cluster_start src; cluster_start tgt --major 17; }
#   teardown_file() { cluster_stop_all; }
#   @test "..."     { psql_at src -c 'select 1'; pg-walcat -d "$src_URL" ...; }
#
# cluster_start NAME exports NAME_URL (libpq conninfo) and NAME_DIR. Every
# cluster a test file starts is recorded on disk, so cluster_stop_all finds
# it even when it was started inside a @test (whose variables are gone by
# teardown_file). A watchdog destroys them if bats itself is killed before
# teardown_file runs. PGSYNC_KEEP_CLUSTERS=1 stops them but keeps their
# directories (data, log/postgresql.log) for a post-mortem.

# shellcheck source=test/lib/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"

# Where this test file's clusters live: a short directory outside
# BATS_FILE_TMPDIR, because the postgres OS user cannot enter bats' 0700
# directories and unix socket paths must stay short. It holds one directory
# per cluster, .clusters (the registry) and .watchdog.pid. Its name is kept in
# BATS_FILE_TMPDIR, which setup_file, the tests and teardown_file share.
# With "create", make it on first use; otherwise fail when there is none.
_cluster_base() {
	local state=${BATS_FILE_TMPDIR:-${TMPDIR:-/tmp}/pgsync-clusters.$$} base
	if [[ -f $state/cluster-base ]]; then
		base=$(<"$state/cluster-base")
		if [[ -d $base ]]; then
			printf '%s\n' "$base"
			return
		fi
	fi
	[[ ${1:-} == create ]] || return 1
	mkdir -p "$state" || return
	base=$(mktemp -d "${PGSYNC_TEST_TMPDIR:-/tmp}/pgsync-test.XXXXXX") || return
	chmod 755 "$base"
	printf '%s\n' "$base" >"$state/cluster-base"
	printf '%s\n' "$base"
}

_cluster_check_name() {
	if ! [[ ${1:-} =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
		echo "cluster: invalid cluster name '${1:-}' (must be a shell identifier)" >&2
		return 2
	fi
}

# True while process $1 runs (a zombie counts as gone).
_cluster_alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat:0:1} != Z ]]
}

# The bats process running this test file: teardown_file runs in it, so
# while it lives the clusters are its business.
_cluster_owner_pid() {
	local pid=$$ i cmd
	for ((i = 0; i < 10 && pid > 1; i++)); do
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || break
		if [[ $cmd == *bats-exec-file* ]]; then
			printf '%s\n' "$pid"
			return
		fi
		pid=$(awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$pid/stat" 2>/dev/null) || break
	done
	printf '%s\n' "${BATS_ROOT_PID:-$$}"
}

# Destroys the clusters if the bats process dies without teardown_file
# (SIGKILL, a CI timeout): polls it once a second.
_cluster_watchdog() {
	local base=$1 owner
	if [[ -f $base/.watchdog.pid ]] && _cluster_alive "$(<"$base/.watchdog.pid")"; then
		return 0
	fi
	owner=$(_cluster_owner_pid)
	# Detached (setsid, double fork, every inherited descriptor closed) so
	# that bats neither waits for it nor keeps reading from it.
	(
		for fd in "/proc/$BASHPID/fd/"*; do
			fd=${fd##*/}
			[[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)) && eval "exec $fd>&-"
		done
		# shellcheck disable=SC2016 # expanded by the inner shell
		setsid bash -c '
			owner=$1 base=$2 pgc=$3
			alive() {
				local s
				s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
				s=${s##*) }
				[[ ${s:0:1} != Z ]]
			}
			while alive "$owner" && [[ -f $base/.clusters ]]; do sleep 1; done
			[[ -f $base/.clusters ]] || exit 0
			while read -r dir; do "$pgc" destroy "$dir"; done <"$base/.clusters"
			rm -f "$base/.clusters" "$base/.watchdog.pid"
			rmdir "$base"
		' pgsync-cluster-watchdog "$owner" "$base" "$PGSYNC_SCRIPTS/pg-cluster" &
		printf '%s\n' "$!" >"$base/.watchdog.pid"
	) </dev/null >/dev/null 2>&1 || true
}

# cluster_start NAME [pg-cluster start options...]
# Starts (or, when NAME was started before in this file, reuses) a cluster
# and exports NAME_URL and NAME_DIR. Not under `run`: exports would be lost.
cluster_start() {
	_cluster_check_name "${1:-}" || return
	local name=$1 base dir url
	shift
	base=$(_cluster_base create) || return
	dir=$base/$name
	# Record before starting: a half-started cluster must be cleaned up too.
	grep -qxF "$dir" "$base/.clusters" 2>/dev/null || printf '%s\n' "$dir" >>"$base/.clusters"
	_cluster_watchdog "$base"
	url=$(pg-cluster start "$dir" "$@") || {
		echo "cluster_start: cannot start cluster $name in $dir" >&2
		return 1
	}
	export "${name}_URL=$url" "${name}_DIR=$dir"
}

_cluster_dir_of() {
	_cluster_check_name "${1:-}" || return
	local var=${1}_DIR base
	if [[ -n ${!var:-} ]]; then
		printf '%s\n' "${!var}"
		return
	fi
	base=$(_cluster_base) || base=""
	if [[ -z $base || ! -d $base/$1 ]]; then
		echo "cluster: no cluster named $1 in this test file" >&2
		return 1
	fi
	printf '%s\n' "$base/$1"
}

# cluster_url NAME: the conninfo of a running cluster.
cluster_url() {
	local dir
	dir=$(_cluster_dir_of "${1:-}") || return
	pg-cluster info "$dir"
}

# cluster_dir NAME
cluster_dir() {
	_cluster_dir_of "${1:-}"
}

# cluster_stop NAME [--mode fast|immediate|smart]: stop, keep the data.
cluster_stop() {
	local dir
	dir=$(_cluster_dir_of "${1:-}") || return
	shift
	pg-cluster stop "$dir" "$@"
}

# cluster_restart NAME [--mode ...]: same port, same data, same NAME_URL.
cluster_restart() {
	local dir
	dir=$(_cluster_dir_of "${1:-}") || return
	shift
	pg-cluster restart "$dir" "$@" >/dev/null
}

# cluster_set NAME name=value...: configure; restart for server-start settings.
cluster_set() {
	local dir
	dir=$(_cluster_dir_of "${1:-}") || return
	shift
	pg-cluster set "$dir" "$@"
}

# cluster_log NAME [LINES]: the tail of the server log, for failure output.
cluster_log() {
	local dir
	dir=$(_cluster_dir_of "${1:-}") || return
	tail -n "${2:-50}" "$dir/log/postgresql.log"
}

# psql_at NAME [psql arguments...]: unaligned, tuples only, stop on error.
psql_at() {
	_cluster_check_name "${1:-}" || return
	local dir url var=${1}_URL
	url=${!var:-}
	if [[ -z $url ]]; then
		dir=$(_cluster_dir_of "$1") || return
		url=$(<"$dir/conninfo")
	fi
	shift
	psql -X -v ON_ERROR_STOP=1 -qAt -d "$url" "$@"
}

# both SQL: run SQL on the clusters src and tgt (tables a test creates on
# each side, the same on both).
both() {
	psql_at src -c "$1" >/dev/null
	psql_at tgt -c "$1" >/dev/null
}

# tgt_db DB [ROLE]: the conninfo of database DB of the cluster tgt (as ROLE).
tgt_db() {
	local url=${tgt_URL/dbname=postgres/dbname=$1}
	echo "${url/user=postgres/user=${2:-postgres}}"
}

# same_tables_in DB TABLE...: every TABLE holds the same rows in the
# database postgres of src and in DB of tgt (table_checksum); a table that
# cannot be read on either side (a server down) differs.
same_tables_in() {
	local db=$1 t a b rc=0
	shift
	for t in "$@"; do
		if ! a=$(table_checksum "$src_URL" "$t") || ! b=$(table_checksum "$(tgt_db "$db")" "$t") ||
			[[ $a != "$b" ]]; then
			echo "table $t differs between source and target database $db" >&2
			rc=1
		fi
	done
	return $rc
}

# same_tables TABLE...: every TABLE holds the same rows on src and tgt.
same_tables() {
	same_tables_in postgres "$@"
}

# cluster_stop_all: stop and remove every cluster this test file started.
# Meant for teardown_file (which bats runs even when tests or setup_file
# failed); keeps going past a cluster that fails to stop, then reports it.
cluster_stop_all() {
	local base status=0 dir keep=${PGSYNC_KEEP_CLUSTERS:-0}
	base=$(_cluster_base) || return 0
	if [[ -f $base/.watchdog.pid ]]; then
		kill "$(<"$base/.watchdog.pid")" 2>/dev/null || true
		rm -f "$base/.watchdog.pid"
	fi
	if [[ -f $base/.clusters ]]; then
		while read -r dir; do
			[[ -n $dir ]] || continue
			if [[ $keep == 1 ]]; then
				pg-cluster stop "$dir" --mode immediate || status=1
				echo "# kept cluster $dir" >&3 2>/dev/null || true
			else
				pg-cluster destroy "$dir" || status=1
			fi
		done <"$base/.clusters"
		[[ $keep == 1 ]] || rm -f "$base/.clusters"
	fi
	if [[ $keep != 1 ]]; then
		rmdir "$base" 2>/dev/null || true
	fi
	return $status
}
