#!/usr/bin/env bash
# Stop the single-node SLURM cluster started by tests/slurm/start_slurm.sh. Idempotent.
# Cancels queued jobs, then stops slurmd, slurmctld, slurmdbd, mariadbd and munged in that order,
# each by the PID in its pidfile (checked against /proc/PID/comm; never pkill/killall):
# SIGTERM, up to 30 s of waiting, then SIGKILL.
set -uo pipefail

log() { echo "[stop_slurm] $*" >&2; }

# shellcheck source=tests/slurm/pidfile.sh
source "$(dirname "${BASH_SOURCE[0]}")/pidfile.sh"

if alive /var/spool/slurmctld/slurmctld.pid slurmctld; then
    jobs=$(squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
        # job ids come from squeue, one per line; passed as separate arguments
        mapfile -t ids <<<"$jobs"
        scancel "${ids[@]}" 2>/dev/null || true
        for _ in $(seq 30); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
    fi
fi

stop_pid /var/spool/slurmd/slurmd.pid slurmd
stop_pid /var/spool/slurmctld/slurmctld.pid slurmctld
stop_pid /var/spool/slurmdbd/slurmdbd.pid slurmdbd
stop_pid /var/spool/slurmdbd/mysql/mysqld.pid mariadbd
stop_pid /run/munge/munged.pid munged
log "stopped"
