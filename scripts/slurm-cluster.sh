#!/usr/bin/env bash
# slurm-cluster.sh up|down|status -- a throwaway Slurm cluster on this one host, for Libra's tests
# and for trying Libra on Slurm by hand. Debian 12's Slurm 22.05, no systemd, no slurmdbd.
#
#   up      install the Debian packages if missing, write /etc/slurm, start munged, slurmctld and
#           one slurmd per node, wait until every node is idle; prints `slurm up: nodes n1 n2 (Ns)`.
#           A cluster this script left running is stopped first, so the knobs below always apply.
#   down    cancel every job, stop exactly the daemons `up` started (their recorded PIDs), remove
#           the cgroups Slurm left empty.
#   status  exit 0 iff the cluster is up (daemons alive, controller answers, nodes usable).
#
# Everything the cluster writes (state, spool, logs, PIDs) lives under /var/tmp/libra-slurm;
# Slurm's configuration is /etc/slurm (the clients read it there).
#
# The machine is shared: whoever uses the cluster (this script, sbatch, a test) holds an exclusive
# flock on /var/tmp/libra-slurm.lock for the whole time, e.g.
#   flock /var/tmp/libra-slurm.lock sh -c 'scripts/slurm-cluster.sh up && sbatch ... ; scripts/slurm-cluster.sh down'
#
# Knobs (environment):
#   LIBRA_SLURM_NODES=2              nodes n1..nN, all on this host (Debian builds slurmd with
#                                    MULTIPLE_SLURMD: one slurmd and one port per node)
#   LIBRA_SLURM_JOB_SUBMIT_LUA=path  installed as /etc/slurm/job_submit.lua, JobSubmitPlugins=lua
#   LIBRA_SLURM_JOBCOMP_LUA=path     installed as /etc/slurm/jobcomp.lua, JobCompType=jobcomp/lua
#   LIBRA_SLURM_EXTRA_CONF=path      its lines appended to slurm.conf (the last value of a key wins)
# (No knob is named SLURM_*: Slurm's own programs read such variables, SLURM_JWT kills slurmctld.)
set -euo pipefail

ROOT=/var/tmp/libra-slurm
LOCK=/var/tmp/libra-slurm.lock
PIDS=$ROOT/pids
LOGS=$ROOT/log
ETC=/etc/slurm
NODES=${LIBRA_SLURM_NODES:-2}
JOB_SUBMIT_LUA=${LIBRA_SLURM_JOB_SUBMIT_LUA:-}
JOBCOMP_LUA=${LIBRA_SLURM_JOBCOMP_LUA:-}
EXTRA_CONF=${LIBRA_SLURM_EXTRA_CONF:-}
# Nodes listen on consecutive ports from here (slurmctld on 6817, Slurm's default).
FIRST_PORT=17001

say() { printf 'slurm-cluster: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# poll SECONDS CMD...: retry CMD every 0.2 s until it succeeds or SECONDS pass.
poll() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons)"; }

check_knobs() {
    [[ "$NODES" =~ ^[1-9][0-9]*$ ]] && [ "$NODES" -le 16 ] ||
        die "LIBRA_SLURM_NODES=$NODES: expected a whole number of nodes from 1 to 16"
    local var
    for var in LIBRA_SLURM_JOB_SUBMIT_LUA LIBRA_SLURM_JOBCOMP_LUA LIBRA_SLURM_EXTRA_CONF; do
        if [ -n "${!var:-}" ] && [ ! -r "${!var}" ]; then
            die "$var=${!var}: no readable file there (expected the path of a file to install)"
        fi
    done
}

# The lock is the callers' (they hold it across up, use and down); taking it here would deadlock
# against them, so only warn when nobody holds it.
warn_unlocked() {
    if flock -n "$LOCK" true 2>/dev/null; then
        say "warning: nobody holds $LOCK; other users of this machine may start or stop the cluster under you (use: flock $LOCK $0 $*)"
    fi
}

install_packages() {
    local missing=()
    command -v munged >/dev/null || missing+=(munge)
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    # job_submit/lua and jobcomp/lua live here and link Lua 5.1 (a dependency of the package).
    [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/job_submit_lua.so ] || missing+=(slurm-wlm-basic-plugins)
    [ "${#missing[@]}" = 0 ] && return 0
    say "installing ${missing[*]}"
    # The packages' postinst would start their daemons through init.d; policy-rc.d forbids it
    # (exit 101) for the time of the install, unless the machine already has one.
    local own_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    local rc=0
    { apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; } || rc=$?
    [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    [ "$rc" = 0 ] || die "apt-get install ${missing[*]} failed"
}

# start NAME CMD...: run CMD (which must stay in the foreground) in the background, record its PID.
# Every descriptor but 0-2 is closed first: a daemon that inherited the caller's descriptor of
# the lock file would hold the flock for as long as it lives.
start() {
    local name=$1; shift
    (
        for fd in /proc/"$BASHPID"/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
        done
        exec setsid "$@" >"$LOGS/$name.out" 2>&1 </dev/null
    ) &
    echo $! >"$PIDS/$name.pid"
}

node_list() { if [ "$NODES" = 1 ]; then echo n1; else echo "n[1-$NODES]"; fi; }

write_conf() {
    local host cpus mem node_mem def_mem topo ports
    host=$(hostname -s)
    # "CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1" as slurmd sees it.
    topo=$(slurmd -C | head -1 | sed 's/^NodeName=[^ ]* //; s/ RealMemory=.*//')
    cpus=$(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' | head -1)
    mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -1)
    # The nodes share this host: each gets every CPU (time-shared, as Libra does) and a slice of
    # the memory, less 512 MB for the rest of the machine.
    node_mem=$(((mem > 1024 ? mem - 512 : mem) / NODES))
    # Four jobs per core may share a node (FORCE:4); a job that asks no memory gets a quarter
    # of a core's part, so memory is not what stops the fourth one.
    def_mem=$((node_mem / (cpus * 4)))
    [ "$def_mem" -ge 1 ] || def_mem=1
    ports=$FIRST_PORT
    [ "$NODES" = 1 ] || ports="[$FIRST_PORT-$((FIRST_PORT + NODES - 1))]"
    install -d -m 0755 "$ETC"
    cat >"$ETC/slurm.conf" <<EOF
# Written by Libra's scripts/slurm-cluster.sh (a test cluster on one host); rewritten at each up.
ClusterName=libra
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
StateSaveLocation=$ROOT/state
SlurmdSpoolDir=$ROOT/spool/%n
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$ROOT/run/slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$def_mem
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/none
InactiveLimit=0
KillWait=5
# Finished jobs stay visible to scontrol for 5 minutes (there is no slurmdbd for sacct).
MinJobAge=300
NodeName=$(node_list) NodeHostname=$host NodeAddr=127.0.0.1 Port=$ports $topo RealMemory=$node_mem State=UNKNOWN
PartitionName=libra Nodes=$(node_list) Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
    cat >"$ETC/cgroup.conf" <<'EOF'
# Written by Libra's scripts/slurm-cluster.sh.
CgroupPlugin=autodetect
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainDevices=no
EOF
    rm -f "$ETC/job_submit.lua" "$ETC/jobcomp.lua"
    if [ -n "$JOB_SUBMIT_LUA" ]; then
        install -m 0644 "$JOB_SUBMIT_LUA" "$ETC/job_submit.lua"
        echo 'JobSubmitPlugins=lua' >>"$ETC/slurm.conf"
    fi
    if [ -n "$JOBCOMP_LUA" ]; then
        install -m 0644 "$JOBCOMP_LUA" "$ETC/jobcomp.lua"
        echo 'JobCompType=jobcomp/lua' >>"$ETC/slurm.conf"
    fi
    if [ -n "$EXTRA_CONF" ]; then
        { echo "# from LIBRA_SLURM_EXTRA_CONF"; cat "$EXTRA_CONF"; } >>"$ETC/slurm.conf"
    fi
}

start_munge() {
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --force >/dev/null 2>&1 ||
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    # -F keeps munged in the foreground, so the recorded PID is munged's; setpriv execs.
    start munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F \
        --log-file="$LOGS/munged.log" --pid-file="$ROOT/run/munged.pid"
    poll 15 sh -c 'munge -n | unmunge' || die "munged did not answer within 15 s (log: $LOGS/munged.log)"
}

nodes_idle() {
    local states
    states=$(sinfo -h -N -o %T 2>/dev/null) || return 1
    [ "$(printf '%s\n' "$states" | grep -c '^idle$')" = "$NODES" ]
}

alive() { [ -f "$PIDS/$1.pid" ] && kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null; }

up() {
    need_root
    check_knobs
    warn_unlocked up
    local start_ns
    start_ns=$(date +%s%N)
    if compgen -G "$PIDS/*.pid" >/dev/null; then
        say "a cluster started earlier is still recorded: stopping it first"
        down
    fi
    install_packages
    install -d -m 0755 "$ROOT" "$PIDS" "$LOGS" "$ROOT/run" "$ROOT/spool"
    # A fresh controller state each time: no job of an earlier run comes back.
    rm -rf "$ROOT/state"
    install -d -m 0700 "$ROOT/state"
    write_conf
    start_munge
    start slurmctld /usr/sbin/slurmctld -D -i
    poll 30 scontrol ping || die "slurmctld did not answer within 30 s (log: $LOGS/slurmctld.log)"
    local i
    for i in $(seq "$NODES"); do
        install -d "$ROOT/spool/n$i"
        start "slurmd-n$i" /usr/sbin/slurmd -D -N "n$i"
    done
    if ! poll 60 nodes_idle; then
        sinfo -N >&2 || true
        die "the nodes were not all idle within 60 s (logs: $LOGS/slurmd-n*.log)"
    fi
    local names ms
    names=$(sinfo -h -N -o %N | sort -V | tr '\n' ' ')
    ms=$((($(date +%s%N) - start_ns) / 1000000))
    printf 'slurm up: nodes %s(%d.%01ds)\n' "$names" $((ms / 1000)) $((ms % 1000 / 100))
}

# stop NAMES...: SIGTERM each recorded daemon at once, then wait for all (SIGKILL after 10 s).
stop() {
    local name f pid pids=()
    for name in "$@"; do
        for f in "$PIDS"/$name.pid; do
            [ -f "$f" ] || continue
            pid=$(cat "$f")
            if kill -0 "$pid" 2>/dev/null; then
                kill "$pid" 2>/dev/null || true
                pids+=("$pid")
            fi
            rm -f "$f"
        done
    done
    for pid in "${pids[@]}"; do
        if ! poll 10 sh -c "! kill -0 $pid"; then
            say "pid $pid still alive 10 s after SIGTERM: SIGKILL"
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
}

down() {
    need_root
    if alive slurmctld; then
        # Running jobs outlive slurmd (their slurmstepd is its own process): cancel them first.
        scancel --partition=libra >/dev/null 2>&1 || true
        poll 20 sh -c '[ -z "$(squeue -h -o %i 2>/dev/null)" ]' ||
            say "warning: jobs still listed 20 s after scancel: $(squeue -h -o %i | tr '\n' ' ')"
    fi
    stop 'slurmd-*'
    stop slurmctld
    stop munged
    # Slurm's cgroup plugins leave slurm_<node>/ (and slurm/) in each v1 controller; remove
    # them when empty so the next run starts clean.
    local d
    for d in /sys/fs/cgroup/*/slurm_n* /sys/fs/cgroup/*/slurm; do
        [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
    say "down"
}

status() {
    alive munged && alive slurmctld || return 1
    local i
    for i in $(seq "$NODES"); do alive "slurmd-n$i" || return 1; done
    scontrol ping >/dev/null 2>&1 || return 1
    # Up means usable: every node answers (idle, mixed or allocated, not down/unknown).
    local ok
    ok=$(sinfo -h -N -o %T 2>/dev/null | grep -cE '^(idle|mixed|allocated|completing)$') || return 1
    [ "$ok" = "$NODES" ]
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) if status; then echo "slurm up"; else echo "slurm down"; exit 1; fi ;;
    *) echo "usage: $0 up|down|status   (see the comment at the top of this file)" >&2; exit 2 ;;
esac
