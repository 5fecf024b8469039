#!/usr/bin/env bash
# Start a real single-node SLURM cluster (munge, MariaDB, slurmdbd, slurmctld, slurmd) on this
# Debian machine, for the @pytest.mark.slurm tests. Idempotent: daemons that are alive are left
# alone; a config file is rewritten (and its daemons restarted by PID) only when its content
# changed. Recipe and measurements: shared/research/slurm_ci.md.
#
# Needs root and apt (Debian 12). Knobs (environment, defaults in brackets):
#   SLURM_WITH_DBD [1]  SLURM_PARTITION [debug]  SLURM_CLUSTER_NAME [ci]
#   SLURM_OVERSUBSCRIBE [FORCE:4]  SLURM_MAX_ARRAY_SIZE [1001]  SLURM_DB_PORT [3306]
#   SLURM_START_TIMEOUT [60] seconds per daemon.
# Stop with tests/slurm/stop_slurm.sh (by PID, never by process name).
set -euo pipefail
# runuser and the daemons live in the sbin folders, which a minimal environment (env -i, cron)
# leaves out of PATH
export PATH="$PATH:/usr/sbin:/sbin"

WITH_DBD=${SLURM_WITH_DBD:-1}
PARTITION=${SLURM_PARTITION:-debug}
CLUSTER=${SLURM_CLUSTER_NAME:-ci}
OVERSUBSCRIBE=${SLURM_OVERSUBSCRIBE:-FORCE:4}
MAX_ARRAY=${SLURM_MAX_ARRAY_SIZE:-1001}
DB_PORT=${SLURM_DB_PORT:-3306}
TIMEOUT=${SLURM_START_TIMEOUT:-60}

MUNGE_PID=/run/munge/munged.pid
DB_DIR=/var/spool/slurmdbd/mysql
DB_SOCK=$DB_DIR/mysqld.sock
DB_PID=$DB_DIR/mysqld.pid
DBD_PID=/var/spool/slurmdbd/slurmdbd.pid
CTLD_PID=/var/spool/slurmctld/slurmctld.pid
SLURMD_PID=/var/spool/slurmd/slurmd.pid
LOGS=/var/log/slurm

log() { echo "[start_slurm] $*" >&2; }
die() {
    log "ERROR: $*"
    for f in /run/munge/munged.log $LOGS/mariadb.err $LOGS/slurmdbd.log $LOGS/slurmctld.log \
        $LOGS/slurmd.log; do
        [ -f "$f" ] && { echo "---- tail $f" >&2; tail -n 25 "$f" >&2; }
    done
    exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (installs packages and starts daemons)"

# shellcheck source=tests/slurm/pidfile.sh
source "$(dirname "${BASH_SOURCE[0]}")/pidfile.sh"

# wait_for WHAT CMD...: poll CMD every 0.5 s until it succeeds or TIMEOUT.
wait_for() {
    local what=$1 i
    shift
    for i in $(seq $((TIMEOUT * 2))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    die "$what not ready after ${TIMEOUT}s"
}

# write_if_changed PATH: stdin becomes PATH's content; returns 0 when it changed.
write_if_changed() {
    local tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if [ -f "$1" ] && cmp -s "$tmp" "$1"; then rm -f "$tmp"; return 1; fi
    chmod 0644 "$tmp"  # mktemp makes 0600; slurm.conf must be world-readable
    mv "$tmp" "$1"
    return 0
}

# ---- packages -------------------------------------------------------------------------------
PKGS=(slurmctld slurmd slurm-client munge)
[ "$WITH_DBD" = 1 ] && PKGS+=(slurmdbd mariadb-server-core mariadb-client-core)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || die "apt-get not found: install ${missing[*]} by hand"
    log "installing ${missing[*]}"
    made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        # keep maintainer scripts from starting services; we start daemons ourselves
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ $made_policy = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

HOST=$(hostname -s)
getent hosts "$HOST" >/dev/null || log "WARNING: hostname $HOST does not resolve; srun may fail"

mkdir -p /etc/slurm $LOGS /var/spool/slurmctld /var/spool/slurmd /var/spool/slurmdbd /run/munge
chown slurm:slurm $LOGS /var/spool/slurmctld /var/spool/slurmdbd
chown munge:munge /run/munge

# ---- munge ----------------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
fi
chmod 0400 /etc/munge/munge.key
if ! alive $MUNGE_PID munged; then
    log "starting munged"
    runuser -u munge -- munged --force --pid-file=$MUNGE_PID --log-file=/run/munge/munged.log \
        --seed-file=/run/munge/munged.seed
fi
munge_ok() { munge -n | unmunge | grep -q 'STATUS: *Success'; }
wait_for munged munge_ok

# ---- slurm.conf (written before slurmdbd starts: sacctmgr checks it) -------------------------
# Advertise 90 % of the memory slurmd measures: more would drain the node ("Low RealMemory").
NODE_LINE=$(slurmd -C | head -n1)
CPUS=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
REALMEM=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
BOARDS=$(sed -n 's/.*Boards=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
SOCKETS=$(sed -n 's/.*SocketsPerBoard=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
CORES=$(sed -n 's/.*CoresPerSocket=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
THREADS=$(sed -n 's/.*ThreadsPerCore=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
MEM=$((REALMEM * 9 / 10))
if [ "$WITH_DBD" = 1 ]; then
    ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30"
else
    ACCT="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
fi
conf_changed=0
write_if_changed /etc/slurm/slurm.conf <<EOF && conf_changed=1
# written by tests/slurm/start_slurm.sh
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
MaxArraySize=$MAX_ARRAY
ReturnToService=2
$ACCT
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGS/jobcomp.log
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Boards=$BOARDS SocketsPerBoard=$SOCKETS CoresPerSocket=$CORES ThreadsPerCore=$THREADS RealMemory=$MEM State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=$OVERSUBSCRIBE
EOF

chmod 0644 /etc/slurm/slurm.conf

# ---- MariaDB + slurmdbd ---------------------------------------------------------------------
if [ "$WITH_DBD" = 1 ]; then
    if [ ! -d "$DB_DIR/mysql" ]; then
        log "initialising MariaDB in $DB_DIR"
        mkdir -p "$DB_DIR"
        chmod 0700 "$DB_DIR"
        mariadb-install-db --no-defaults --user=root --datadir="$DB_DIR" \
            --auth-root-authentication-method=socket --skip-test-db >/dev/null
    fi
    if ! alive $DB_PID mariadbd; then
        log "starting mariadbd"
        setsid mariadbd --no-defaults --user=root --datadir="$DB_DIR" --socket="$DB_SOCK" \
            --pid-file="$DB_PID" --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
            --innodb-buffer-pool-size=256M --innodb-lock-wait-timeout=900 \
            --log-error=$LOGS/mariadb.err </dev/null >/dev/null 2>&1 &
    fi
    wait_for mariadbd mariadb --no-defaults -S "$DB_SOCK" -uroot -e 'SELECT 1'
    mariadb --no-defaults -S "$DB_SOCK" -uroot -e "
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'ci-only-throwaway';
        CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'ci-only-throwaway';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"

    dbd_changed=0
    write_if_changed /etc/slurm/slurmdbd.conf <<EOF && dbd_changed=1
# written by tests/slurm/start_slurm.sh (throwaway local CI database)
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=slurm
DebugLevel=info
LogFile=$LOGS/slurmdbd.log
PidFile=$DBD_PID
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=ci-only-throwaway
StorageLoc=slurm_acct_db
EOF
    chown slurm:slurm /etc/slurm/slurmdbd.conf
    chmod 0600 /etc/slurm/slurmdbd.conf
    if [ $dbd_changed = 1 ] || [ $conf_changed = 1 ]; then stop_pid $DBD_PID slurmdbd; fi
    if ! alive $DBD_PID slurmdbd; then
        log "starting slurmdbd"
        slurmdbd
    fi
    wait_for slurmdbd sacctmgr -n list cluster
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
    fi
fi

# ---- slurmctld + slurmd ---------------------------------------------------------------------
if [ $conf_changed = 1 ]; then
    stop_pid $SLURMD_PID slurmd
    stop_pid $CTLD_PID slurmctld
fi
if ! alive $CTLD_PID slurmctld; then
    log "starting slurmctld"
    slurmctld
fi
wait_for slurmctld scontrol ping
if ! alive $SLURMD_PID slurmd; then
    log "starting slurmd"
    slurmd
fi
node_ready() {
    local st
    st=$(sinfo -h -n "$HOST" -o %t 2>/dev/null | head -n1)
    case "$st" in
    idle* | mix* | alloc* | comp*) return 0 ;;
    drain* | drng* | down*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 ;;
    esac
    return 1
}
wait_for "slurmd (node $HOST)" node_ready

timeout 60 srun -p "$PARTITION" -N1 -n1 -t 1 true || die "srun smoke test failed"
log "SLURM cluster '$CLUSTER' up: partition $PARTITION, node $HOST, MaxArraySize $MAX_ARRAY"
