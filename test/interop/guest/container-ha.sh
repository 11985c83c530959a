#!/bin/sh
# Guest script (busybox sh) of the HA case in test/interop/container-host.test.ts: the Linux 6.1 host with native
# multipath connects to both gateways of docker/compose.ha.yaml (gw1 at $GW1_IP:4420, gw2 at $GW2_IP:4420, qemu
# guestfwds to their published ports), writes with fio while the host test kills gw1 (on "@@HOST KILL-GW1"),
# verifies through gw2, then asks for gw1 back ("@@HOST RESTART-GW1"), waits for its path to be live and
# optimized again, and verifies through it. Step markers as in kernel-host.sh.
GW1=${GW1_IP:-10.0.2.100}
GW2=${GW2_IP:-10.0.2.101}
NQN=${NQN:-nqn.2024-01.io.nvme-tcp-ts:ha}
FAILED=""
# Requests to the host test go to the script's own stdout (fd 3), past step()'s redirection of each step.
exec 3>&1
FIO="--name=ha --bs=4k --size=24M --rw=randwrite --verify=crc32c --direct=1 --ioengine=libaio --iodepth=8 --eta=never"

echo 10 > /sys/module/nvme_core/parameters/admin_timeout
echo 10 > /sys/module/nvme_core/parameters/io_timeout

step() {
    name=$1; shift
    echo "@@STEP $name BEGIN"
    "$@" > /tmp/step.out 2>&1
    rc=$?
    if [ $rc = 0 ]; then
        tail -n 25 /tmp/step.out
        echo "@@STEP $name PASS"
    else
        tail -n 60 /tmp/step.out
        echo "--- dmesg (last 30 lines)"
        dmesg | tail -n 30
        echo "@@STEP $name FAIL rc=$rc"
        FAILED="$FAILED $name"
    fi
    return $rc
}
fail() { echo "CHECK FAILED: $*"; return 1; }

# controller (nvmeX) of $NQN whose transport address names $1
ctrl_to() {
    for c in /sys/class/nvme/nvme*; do
        [ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$NQN" ] || continue
        grep -q "traddr=$1," "$c/address" 2>/dev/null && { basename "$c"; return 0; }
    done
    return 1
}
# path device (nvmeXcYnZ) of namespace 1 through controller $1
path_of() {
    for p in /sys/block/nvme*c*n1; do
        [ "$(basename "$(readlink -f "$p/device")")" = "$1" ] && { basename "$p"; return 0; }
    done
    return 1
}
head_dev() {
    for b in /sys/block/nvme*n1; do
        case ${b##*/} in nvme*c*) continue ;; esac
        [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NQN" ] && { basename "$b"; return 0; }
        [ -d "$b/multipath" ] && { basename "$b"; return 0; }
    done
    return 1
}

do_connect() {
    [ "$(cat /sys/module/nvme_core/parameters/multipath)" = Y ] || fail "native multipath is off" || return 1
    for a in $GW1 $GW2; do
        nvme connect -t tcp -a $a -s 4420 -n "$NQN" -i 2 -c 1 -l 120 || fail "nvme connect $a exited $?" || return 1
    done
    i=0
    while [ $i -lt 150 ]; do
        H=$(head_dev) && C1=$(ctrl_to $GW1) && C2=$(ctrl_to $GW2) && P1=$(path_of $C1) && P2=$(path_of $C2) && [ -b /dev/$H ] && break
        sleep 0.1; i=$((i + 1))
    done
    nvme list-subsys 2>/dev/null || true
    [ -n "$H" ] && [ -n "$P1" ] && [ -n "$P2" ] || fail "head=${H:-none} gw1 path=${P1:-none} gw2 path=${P2:-none}" || return 1
    echo "head /dev/$H: $P1 via $C1 (cntlid $(cat /sys/class/nvme/$C1/cntlid)) $(cat /sys/block/$P1/ana_state), $P2 via $C2 (cntlid $(cat /sys/class/nvme/$C2/cntlid)) $(cat /sys/block/$P2/ana_state)"
    [ "$(cat /sys/block/$P1/ana_state)" = optimized ] || fail "gw1 path is not optimized" || return 1
    [ "$(cat /sys/block/$P2/ana_state)" = non-optimized ] || fail "gw2 path is not non-optimized"
}

# fio writes (rate-limited so gw1 dies mid-run), then verifies what it wrote, across the kill
do_fio_kill() {
    ( sleep 2; echo "@@HOST KILL-GW1" >&3 ) &
    fio $FIO --filename=/dev/$H --rate_iops=1000 --do_verify=1 --output=/tmp/fio.out; rc=$?
    grep -E 'err=|IOPS|verify|crc' /tmp/fio.out | head -n 12
    echo "gw1 controller $C1 state: $(cat /sys/class/nvme/$C1/state 2>/dev/null)"
    [ $rc = 0 ] || { tail -n 30 /tmp/fio.out; fail "fio exited $rc"; return 1; }
    grep -q 'err= 0' /tmp/fio.out || fail "fio reported errors"
}

do_failback() {
    echo "@@HOST RESTART-GW1" >&3
    i=0
    while [ $i -lt 600 ]; do
        [ "$(cat /sys/class/nvme/$C1/state 2>/dev/null)" = live ] && [ "$(cat /sys/block/$P1/ana_state 2>/dev/null)" = optimized ] && {
            echo "gw1 path live and optimized after $((i / 10)) s"; return 0; }
        sleep 0.1; i=$((i + 1))
    done
    fail "gw1 path state $(cat /sys/class/nvme/$C1/state 2>/dev/null), ana $(cat /sys/block/$P1/ana_state 2>/dev/null)"
}

do_verify() {
    fio $FIO --filename=/dev/$H --verify_only --output=/tmp/fio.out; rc=$?
    grep -E 'err=|IOPS|verify|crc' /tmp/fio.out | head -n 12
    [ $rc = 0 ] || { tail -n 30 /tmp/fio.out; fail "fio exited $rc"; return 1; }
    grep -q 'err= 0' /tmp/fio.out || fail "fio reported errors"
}

do_disconnect() {
    nvme disconnect -n "$NQN" || fail "nvme disconnect exited $?" || return 1
    ! ls /sys/class/nvme/ 2>/dev/null | grep -q nvme || { ls -l /sys/class/nvme/; fail "a controller is left"; }
}

if step ha-connect do_connect; then
    step ha-fio-kill do_fio_kill
    step ha-failback do_failback && step ha-verify-after-failback do_verify
    step ha-disconnect do_disconnect
fi
if [ -n "$FAILED" ]; then
    echo "@@RESULT FAIL:$FAILED"
    exit 1
fi
echo "@@RESULT PASS"
exit 0
