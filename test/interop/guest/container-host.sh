#!/bin/sh
# Guest script (busybox sh) of test/interop/container-host.test.ts: the Linux 6.1 kernel host against the target
# container of docker/compose.yaml, reached at $TARGET_IP:$TARGET_PORT (qemu guestfwd to the container's port
# published on the host's 127.0.0.1). Step markers as in kernel-host.sh:
#   @@STEP <name> BEGIN  ...output...  @@STEP <name> PASS   |   @@STEP <name> FAIL rc=<n>
# Environment: NQN (docker/target.json's subsystem: nsid 1 RAM), FIO_SIZE (default 16M).
A=${TARGET_IP:-${LAB_GUESTFWD_IP:-10.0.2.100}}
P=${TARGET_PORT:-${LAB_GUESTFWD_PORT:-4420}}
NQN=${NQN:-nqn.2024-01.io.nvme-tcp-ts:lab}
FIO_SIZE=${FIO_SIZE:-16M}
FAILED=""

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
        echo "--- dmesg (last 25 lines)"
        dmesg | tail -n 25
        echo "@@STEP $name FAIL rc=$rc"
        FAILED="$FAILED $name"
    fi
    return $rc
}
fail() { echo "CHECK FAILED: $*"; return 1; }

ns_dev() {
    for b in /sys/block/nvme*n*; do
        case ${b##*/} in nvme*c*) continue ;; esac
        [ -e "$b/nsid" ] || continue
        [ "$(cat "$b/nsid")" = "$1" ] || continue
        [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NQN" ] && { basename "$b"; return 0; }
    done
    return 1
}

do_discover() {
    nvme discover -t tcp -a "$A" -s "$P" > /tmp/disc.out 2>&1; rc=$?
    cat /tmp/disc.out
    [ $rc = 0 ] || fail "nvme discover exited $rc" || return 1
    grep -q "subnqn: *$NQN" /tmp/disc.out || fail "$NQN not in the discovery log"
}

do_connect() {
    nvme connect -t tcp -a "$A" -s "$P" -n "$NQN" -i 2 || fail "nvme connect exited $?" || return 1
    i=0
    while [ $i -lt 150 ]; do
        N=$(ns_dev 1) && [ -b "/dev/$N" ] && { echo "nsid 1 = /dev/$N"; nvme list; return 0; }
        sleep 0.1; i=$((i + 1))
    done
    nvme list; fail "no block device for nsid 1"
}

fio_verify() {
    N=$(ns_dev 1) || fail "no nsid 1 device" || return 1
    fio --name=verify-$1 --filename=/dev/$N --rw=randwrite --bs="$1" --size="$FIO_SIZE" \
        --verify=crc32c --do_verify=1 --direct=1 --ioengine=libaio --iodepth=8 --eta=never \
        --output=/tmp/fio.out; rc=$?
    grep -E 'err=|IOPS|verify|crc' /tmp/fio.out | head -n 12
    [ $rc = 0 ] || { tail -n 30 /tmp/fio.out; fail "fio exited $rc"; return 1; }
    grep -q 'err= 0' /tmp/fio.out || fail "fio reported errors"
}

do_disconnect() {
    nvme disconnect -n "$NQN" || fail "nvme disconnect exited $?" || return 1
    ! ls /sys/class/nvme/ 2>/dev/null | grep -q nvme || { ls -l /sys/class/nvme/; fail "a controller is left"; }
}

step discover do_discover
if step connect do_connect; then
    step fio-4k fio_verify 4k
    step fio-128k fio_verify 128k
    step disconnect do_disconnect
fi
if [ -n "$FAILED" ]; then
    echo "@@RESULT FAIL:$FAILED"
    exit 1
fi
echo "@@RESULT PASS"
exit 0
