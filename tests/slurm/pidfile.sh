# Process helpers shared by start_slurm.sh and stop_slurm.sh (sourced; the caller defines log).
# Daemons are identified by their pidfile, checked against /proc/PID/comm: never by name.

# alive PIDFILE COMM: the pidfile names a live (non-zombie) process with that command name.
alive() {
    local pid
    [ -s "$1" ] || return 1
    pid=$({ tr -dc '0-9' <"$1"; } 2>/dev/null)
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
    # field 3 of /proc/PID/stat is the state; the command name (field 2) may contain spaces.
    [ "$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]
}

# stop_pid PIDFILE COMM: TERM, wait up to 30 s, then KILL. Only the process named by the pidfile.
stop_pid() {
    alive "$1" "$2" || return 0
    local pid i
    pid=$({ tr -dc '0-9' <"$1"; } 2>/dev/null)
    log "stopping $2 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 60); do alive "$1" "$2" || return 0; sleep 0.5; done
    log "$2 (pid $pid) ignored SIGTERM for 30 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
}
