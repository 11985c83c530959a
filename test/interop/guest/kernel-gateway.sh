#!/bin/sh
# Guest side (busybox sh) of test/interop/kernel-gateway.test.ts: the Linux host with native NVMe multipath connected
# to the three gateways of one gateway group (docs/gateway-groups.md). The test copies this file into the guest
# (harness/kernel-host/runner.ts's command loop) and runs one subcommand at a time between its own actions on the
# gateways (kill, restart), so the host decides when the guest looks.
#
#   kernel-gateway.sh connect NQN ADDR PORT...   nvme connect to each ADDR:PORT (one multipath head, one path each)
#   kernel-gateway.sh paths NQN                  one line per controller of NQN:
#                                                  @@PATH port=P ctrl=nvmeX state=S path=nvmeYcXnZ ana=A ios=R,W
#                                                then @@HEAD head=nvmeYnZ multipath=Y|N
#   kernel-gateway.sh wait NQN PORT STATE ANA [S]  poll `paths` until PORT's controller is STATE with ANA (up to S s)
#   kernel-gateway.sh show NQN                   nvme list-subsys, nvme list-subsys HEAD, nvme ana-log of each
#                                                live controller (what the README shows)
#   kernel-gateway.sh fio-start NQN NAME ARGS... fio on the multipath head in the background (its JSON, exit status
#                                                and 250 ms IOPS log under /tmp/NAME.*)
#   kernel-gateway.sh fio-stop NAME              end it early (SIGINT)
#   kernel-gateway.sh fio-wait NAME [S]          wait for it (up to S s); print @@FIO rc=N, @@GAPAT T MS for each
#                                                stretch over 500 ms without a completion (T: ms into fio), @@GAP
#                                                the longest, then @@JSON and fio's JSON
#   kernel-gateway.sh disconnect NQN
set -u
cmd=$1; shift

# ctrl subsystem-NQN: the controllers (nvmeX) of the subsystem
ctrls() {
    for c in /sys/class/nvme/nvme*; do
        [ -e "$c/subsysnqn" ] && [ "$(cat "$c/subsysnqn")" = "$1" ] && basename "$c"
    done
}
# the multipath head's block device (nvmeYnZ) of the subsystem
head_of() {
    for s in /sys/class/nvme-subsystem/nvme-subsys*; do
        [ "$(cat "$s/subsysnqn" 2>/dev/null)" = "$1" ] || continue
        for b in "$s"/nvme*n*; do
            n=$(basename "$b")
            case $n in *c*) ;; *) echo "$n"; return 0 ;; esac
        done
    done
    return 1
}

paths() {
    for c in $(ctrls "$1"); do
        port=$(sed -n 's/.*trsvcid=\([0-9]*\).*/\1/p' "/sys/class/nvme/$c/address")
        state=$(cat "/sys/class/nvme/$c/state")
        p=-; ana=-; ios=-
        for d in /sys/class/nvme/$c/nvme*c*n*; do
            [ -e "$d/ana_state" ] || continue
            p=$(basename "$d"); ana=$(cat "$d/ana_state")
            # the path disk's stat: reads completed (field 1), writes completed (field 5)
            ios=$(awk '{ print $1 "," $5 }' "$d/stat" 2>/dev/null || echo -)
        done
        echo "@@PATH port=$port ctrl=$c state=$state path=$p ana=$ana ios=$ios"
    done
    echo "@@HEAD head=$(head_of "$1" || echo -) multipath=$(cat /sys/module/nvme_core/parameters/multipath)"
}

case $cmd in
connect)
    nqn=$1; addr=$2; shift 2
    echo 10 > /sys/module/nvme_core/parameters/admin_timeout
    for port in "$@"; do
        echo "# nvme connect -t tcp -a $addr -s $port -n $nqn --reconnect-delay=1 --ctrl-loss-tmo=-1"
        nvme connect -t tcp -a "$addr" -s "$port" -n "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=-1 || exit 1
    done
    i=0; while [ $i -lt 100 ]; do h=$(head_of "$nqn") && [ -b "/dev/$h" ] && break; sleep 0.2; i=$((i + 1)); done
    paths "$nqn"
    ;;
paths) paths "$1" ;;
wait)
    nqn=$1; port=$2; want_state=$3; want_ana=$4; max=${5:-60}
    t=0
    while :; do
        line=$(paths "$nqn" | grep "^@@PATH port=$port ")
        case $line in *"state=$want_state "*"ana=$want_ana "*) echo "$line"; echo "@@WAITED $t"; exit 0 ;; esac
        [ "$t" -ge $((max * 5)) ] && { echo "$line"; echo "@@WAITED timeout"; exit 1; }
        sleep 0.2; t=$((t + 1))
    done
    ;;
show)
    nqn=$1; h=$(head_of "$nqn")
    echo '$ nvme list-subsys'; nvme list-subsys
    echo "\$ nvme list-subsys /dev/$h"; nvme list-subsys "/dev/$h"
    for c in $(ctrls "$nqn"); do
        [ "$(cat "/sys/class/nvme/$c/state")" = live ] || continue
        echo "\$ nvme ana-log /dev/$c   # trsvcid $(sed -n 's/.*trsvcid=\([0-9]*\).*/\1/p' "/sys/class/nvme/$c/address")"
        nvme ana-log "/dev/$c"
    done
    ;;
fio-start)
    nqn=$1; name=$2; shift 2; h=$(head_of "$nqn") || { echo "no multipath head for $nqn"; exit 1; }
    rm -f /tmp/"$name".*
    # the lab's init reaps what is left at the end; fio-wait collects it
    ( fio --name="$name" --filename="/dev/$h" --ioengine=libaio --direct=1 --bs=4k \
        --write_iops_log="/tmp/$name" --log_avg_msec=250 --output-format=json --output="/tmp/$name.json" "$@" \
        > "/tmp/$name.out" 2>&1 &
      echo $! > "/tmp/$name.pid"; wait $!; echo $? > "/tmp/$name.rc" ) < /dev/null > /dev/null 2>&1 &
    echo "fio $name started on /dev/$h"
    ;;
fio-stop)
    # SIGINT: fio ends its jobs, verifies nothing more, writes its JSON and exits (status 0 or 128)
    i=0; while [ ! -s "/tmp/$1.pid" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -INT "$(cat "/tmp/$1.pid")" && echo "fio $1: SIGINT"
    ;;
fio-wait)
    name=$1; max=${2:-300}; t=0
    while [ ! -e "/tmp/$name.rc" ]; do
        [ "$t" -ge $((max * 5)) ] && { echo "@@FIO rc=timeout"; exit 1; }
        sleep 0.2; t=$((t + 1))
    done
    echo "@@FIO rc=$(cat "/tmp/$name.rc")"
    cat "/tmp/$name.out"
    # the longest stretch without a completed I/O: the 250 ms IOPS log (time ms, iops, dir, ...), reads and writes
    cat /tmp/"$name"_iops.*.log 2>/dev/null | awk -F', *' '$2 > 0 { print $1 }' | sort -n | \
        awk 'NR > 1 && $1 - p > g { g = $1 - p } NR > 1 && $1 - p > 500 { printf "@@GAPAT %d %d\n", p, $1 - p } { p = $1 }
             END { print "@@GAP " g + 0 }'
    echo "@@JSON"
    cat "/tmp/$name.json"
    ;;
disconnect) nvme disconnect -n "$1" ;;
*) echo "unknown subcommand $cmd"; exit 2 ;;
esac
