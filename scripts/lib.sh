# Shared shell helpers for the demo, the test suite and the benchmarks.
# Source it; it defines functions only (plus defaults below).
#
# Everything runs as an unprivileged user: PostgreSQL refuses to run as root,
# and dex-memnode has no reason to. When invoked as root we use the `postgres`
# system user (created by Debian's postgresql packages).

DEX_ROOT=${DEX_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
DEX_RUN_USER=${DEX_RUN_USER:-postgres}
# DEX_WORK as the caller's environment gave it (empty: not given), so that a
# script can choose its own default after sourcing this file (default_work_dir).
DEX_WORK_FROM_ENV=${DEX_WORK_FROM_ENV-${DEX_WORK:-}}
DEX_WORK=${DEX_WORK:-/tmp/dex-work}
PG_BIN=${PG_BIN:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}

DEX_APT_PACKAGES="build-essential cmake g++ pkg-config libgtest-dev libgmock-dev libboost-dev \
postgresql-15 postgresql-server-dev-15 libicu-dev gnuplot-nox procps iproute2 python3 \
libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils rdmacm-utils \
qemu-system-x86 busybox-static sqlsmith"
# (rdma-core: the rdma:// transport; qemu + busybox-static: `make check-rdma` boots a
# Soft-RoCE guest with scripts/rdma/vm.sh, which also uses iproute2's `rdma`, see README.md;
# sqlsmith: the SQL fuzzer of scripts/tests/t_sqlsmith.sh)

# default_work_dir DIR: use DIR as DEX_WORK unless the environment set one.
# (A plain ${DEX_WORK:-DIR} after sourcing this file never takes effect.)
default_work_dir() {
    DEX_WORK=${DEX_WORK_FROM_ENV:-$1}
    export DEX_WORK
}

log() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

as_user() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$DEX_RUN_USER" -- "$@"; else "$@"; fi
}

# Like as_user, but replaces the calling (sub)shell: run as `exec_as_user cmd &`
# and $! is the server's own pid, so signals reach it directly.
exec_as_user() {
    if [ "$(id -u)" = 0 ]; then
        exec setpriv --reuid="$DEX_RUN_USER" --regid="$DEX_RUN_USER" --init-groups -- "$@"
    else
        exec "$@"
    fi
}

maybe_sudo() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# private_pg_install CHECKOUT ROOT: a copy of the system PostgreSQL tree at
# ROOT with CHECKOUT's dex (built) installed into it, and PG_BIN set to its
# bindir. PostgreSQL finds share/ and lib/ relative to its binaries, so the
# copy is a complete installation: benchmarks compare checkouts with it
# without touching the system install (or its lock).
private_pg_install() {
    local co=$1 root=$2 sys_bin sys_share sys_lib
    sys_bin=$(pg_config --bindir); sys_share=$(pg_config --sharedir); sys_lib=$(pg_config --pkglibdir)
    rm -rf "$root"
    mkdir -p "$root$(dirname "$sys_share")" "$root$(dirname "$(dirname "$sys_lib")")"
    cp -a "$sys_share" "$root$(dirname "$sys_share")/"
    cp -a "$(dirname "$sys_lib")" "$root$(dirname "$(dirname "$sys_lib")")/"   # Debian: bin/ and lib/ side by side
    [ -x "$root$sys_bin/postgres" ] || die "unexpected PostgreSQL layout (bindir $sys_bin)"
    make -C "$co" -s install DESTDIR="$root" >/dev/null || die "private install failed"
    chmod -R a+rX "$root"   # the server runs as $DEX_RUN_USER
    PG_BIN=$root$sys_bin
    [ "$("$PG_BIN/pg_config" --sharedir)" = "$root$sys_share" ] || die "the private PostgreSQL tree does not relocate"
}

# Install the Debian packages we need, only if something is missing.
install_deps() {
    local missing=()
    for p in $DEX_APT_PACKAGES; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing packages: ${missing[*]}"
        maybe_sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
        maybe_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    fi
    # The Debian server package starts a cluster on 5432; we use our own scratch clusters.
    PG_BIN=$(pg_config --bindir)
    id "$DEX_RUN_USER" >/dev/null 2>&1 || die "user $DEX_RUN_USER does not exist"
}

# Build the core, the memory node and the extension, and install them.
build_install() {
    log "building dex"
    make -C "$DEX_ROOT" -s -j"$(nproc)" >/dev/null || die "build failed"
    log "installing dex into $(pg_config --pkglibdir)"
    maybe_sudo make -C "$DEX_ROOT" -s install >/dev/null || die "install failed"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

prepare_workdir() {
    mkdir -p "$DEX_WORK"
    chmod 755 "$DEX_WORK"
    [ "$(id -u)" = 0 ] && chown "$DEX_RUN_USER" "$DEX_WORK"
    return 0
}

# start_standby NAME PRIMARY_PORT PORT [conf lines...]: a streaming hot standby
# (pg_basebackup -R) of the cluster on PRIMARY_PORT in $DEX_WORK/NAME, log in
# NAME-server.log; nonzero if it could not be made or started
start_standby() {
    local name=$1 primary=$2 port=$3; shift 3
    rm -rf "$DEX_WORK/$name"
    as_user "$PG_BIN/pg_basebackup" -h "$DEX_WORK" -p "$primary" -U postgres -D "$DEX_WORK/$name" -R -X stream -c fast \
        >/dev/null || return 1
    { echo "port = $port"; echo "hot_standby = on"; for l in "$@"; do echo "$l"; done; } \
        | as_user tee -a "$DEX_WORK/$name/postgresql.conf" >/dev/null
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/$name" -l "$DEX_WORK/$name-server.log" -w -t 60 start >/dev/null
}

# start_replicated_bench NAME CHECKOUT: the standby benches' setup -- CHECKOUT
# installed privately (private_pg_install), DEX_WORK=/tmp/dex-NAME-<checkout>,
# a memory node pw-mem and a primary pw (256MB node cache, ready to stream to
# a standby sb: start_standby sb "$pport" "$sport"); sets mport, pport, sport;
# all three are stopped on exit.
start_replicated_bench() {
    DEX_ROOT=$2
    DEX_WORK=/tmp/dex-$1-$(basename "$2"); export DEX_WORK
    rm -rf "$DEX_WORK"
    private_pg_install "$2" "$DEX_WORK-pgroot"
    prepare_workdir
    mport=$(free_port); pport=$(free_port); sport=$(free_port)
    trap 'stop_cluster sb; stop_cluster pw; stop_memnode pw-mem' EXIT
    start_memnode pw-mem "$mport" 1GB --threads 2
    start_cluster pw "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off" \
        "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '1GB'"
}

# start_memnode NAME PORT MEMORY [extra flags...] -> pid in $DEX_WORK/NAME.pid, log in NAME.log
start_memnode() {
    local name=$1 port=$2 mem=$3; shift 3
    prepare_workdir
    local logf="$DEX_WORK/$name.log"
    exec_as_user "$PG_BIN/dex-memnode" --listen "127.0.0.1:$port" --memory "$mem" "$@" >"$logf" 2>&1 &
    echo $! >"$DEX_WORK/$name.pid"
    # touching a large pool takes a while on a small machine
    for _ in $(seq 1 600); do
        grep -q "listening" "$logf" 2>/dev/null && return 0
        kill -0 "$(cat "$DEX_WORK/$name.pid")" 2>/dev/null || { cat "$logf" >&2; die "dex-memnode $name failed to start"; }
        sleep 0.1
    done
    cat "$logf" >&2; die "dex-memnode $name did not start listening"
}

stop_memnode() {
    local name=$1 sig=${2:-TERM}
    local pidf="$DEX_WORK/$name.pid"
    [ -f "$pidf" ] || return 0
    local pid; pid=$(cat "$pidf")
    case $sig in STOP|CONT) kill -"$sig" "$pid"; return 0 ;; esac  # pause/resume, keep the pid file
    kill -"$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "dex-memnode $name did not exit on SIG$sig; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true; sleep 0.2
    fi
    rm -f "$pidf"
}

# start_cluster NAME PGPORT MEMNODE_URLS [extra postgresql.conf lines...]
start_cluster() {
    local name=$1 port=$2 memnodes=$3; shift 3
    prepare_workdir
    local data="$DEX_WORK/$name"
    rm -rf "$data"
    as_user "$PG_BIN/initdb" -D "$data" -A trust -U postgres --no-sync >"$DEX_WORK/$name-initdb.log" 2>&1 \
        || { cat "$DEX_WORK/$name-initdb.log"; die "initdb failed"; }
    {
        echo "port = $port"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$DEX_WORK'"
        echo "shared_preload_libraries = 'dex'"
        echo "dex.memnodes = '$memnodes'"
        echo "dex.cache_size = '64MB'"
        echo "fsync = off"
        echo "max_connections = 50"
        echo "shared_buffers = '256MB'"
        echo "log_min_messages = warning"
        for line in "$@"; do echo "$line"; done
    } | as_user tee -a "$data/postgresql.conf" >/dev/null
    as_user "$PG_BIN/pg_ctl" -D "$data" -l "$DEX_WORK/$name-server.log" -w -t 60 start >/dev/null \
        || { cat "$DEX_WORK/$name-server.log"; die "PostgreSQL $name failed to start"; }
}

stop_cluster() {
    local name=$1
    [ -d "$DEX_WORK/$name" ] || return 0
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/$name" -m fast -w stop >/dev/null 2>&1 || true
}

# psql against a scratch cluster: dpsql PGPORT [psql args...]
dpsql() {
    local port=$1; shift
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DEX_WORK" -p "$port" -U postgres "$@"
}

# check_kv_answers PORT: the benchmarks' tables kv_dex and kv_btree (k, v)
# answer the same through their index as through a sequential scan, and
# dex_check passes on kv_dex_k; dies otherwise.
check_kv_answers() {
    local port=$1 t a b
    for t in dex btree; do
        a=$(dpsql "$port" -d postgres -At -c "SET enable_seqscan = off; SET enable_bitmapscan = off" \
              -c "SELECT count(*), sum(k), sum(v) FROM kv_$t WHERE k > -1e18" | tail -1)
        b=$(dpsql "$port" -d postgres -At -c "SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_indexonlyscan = off" \
              -c "SELECT count(*), sum(k), sum(v) FROM kv_$t WHERE k > -1e18" | tail -1)
        [ "$a" = "$b" ] || die "kv_$t: index scan $a, seqscan $b"
    done
    dpsql "$port" -d postgres -At -c "SELECT dex_check('kv_dex_k')" >/dev/null
}
