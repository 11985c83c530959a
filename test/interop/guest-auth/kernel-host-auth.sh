#!/bin/sh
# Guest script (busybox sh) of test/interop/auth-kernel.test.ts, part 1: the Linux host (nvme-cli 2.3 on a kernel
# with CONFIG_NVME_HOST_AUTH) connects to our TypeScript target with `nvme connect --dhchap-secret
# [--dhchap-ctrl-secret]`, runs verified I/O and disconnects; refusals must fail the connect and leave nothing behind.
# One case per scenario; each prints
#   @@STEP <name> BEGIN ... @@STEP <name> PASS | FAIL rc=<n>
#
# Environment (run.sh --env):
#   SUBNQN                    the subsystem (nsid 1)
#   CASES                     space-separated case names; for each NAME:
#     NAME_NQN, NAME_ID       host NQN / host ID to connect with (one per case: the target holds keys per host)
#     NAME_KEY, NAME_CKEY     --dhchap-secret / --dhchap-ctrl-secret values (empty = not given)
#     NAME_IOQ                --nr-io-queues
#     NAME_EXPECT             ok | fail
#     NAME_DMESG              (ok cases) text dmesg must show, e.g. "hash hmac(sha384) dhgroup ffdhe2048"
A=${LAB_GUESTFWD_IP:-10.0.2.100}
P=${LAB_GUESTFWD_PORT:-4420}
FAILED=""

echo 10 > /sys/module/nvme_core/parameters/admin_timeout
echo 10 > /sys/module/nvme_core/parameters/io_timeout
uname -r
nvme version | head -n 1

fail() { echo "CHECK FAILED: $*"; return 1; }

ctrl_of() {   # live controller of $SUBNQN for host $1
    for c in /sys/class/nvme/nvme*; do
        [ -e "$c/subsysnqn" ] || continue
        [ "$(cat "$c/subsysnqn")" = "$SUBNQN" ] && [ "$(cat "$c/hostnqn" 2>/dev/null)" = "$1" ] && { basename "$c"; return 0; }
    done
    return 1
}

ns_of() {     # block device of nsid 1 under controller $1
    for b in /sys/block/nvme*n1; do
        case ${b##*/} in nvme*c*) continue ;; esac
        [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$SUBNQN" ] || continue
        [ -b "/dev/${b##*/}" ] && { basename "$b"; return 0; }
    done
    return 1
}

get() { eval "printf '%s' \"\${${1}_$2:-}\""; }

run_case() {
    name=$1
    nqn=$(get "$name" NQN); id=$(get "$name" ID); key=$(get "$name" KEY); ckey=$(get "$name" CKEY)
    ioq=$(get "$name" IOQ); expect=$(get "$name" EXPECT); want=$(get "$name" DMESG)
    dmesg -c > /dev/null
    set -- -t tcp -a "$A" -s "$P" -n "$SUBNQN" --hostnqn="$nqn" --hostid="$id" --nr-io-queues="${ioq:-1}"
    [ -n "$key" ] && set -- "$@" --dhchap-secret="$key"
    [ -n "$ckey" ] && set -- "$@" --dhchap-ctrl-secret="$ckey"
    echo "nvme connect ... --hostnqn=$nqn${key:+ --dhchap-secret=<key>}${ckey:+ --dhchap-ctrl-secret=<ckey>} (expect $expect)"
    nvme connect "$@"; rc=$?
    if [ "$expect" = fail ]; then
        dmesg | grep -i 'nvme' | tail -n 8
        [ $rc != 0 ] || { C=$(ctrl_of "$nqn"); [ -n "$C" ] && nvme disconnect -d "$C"; fail "connect succeeded but should have been refused"; return 1; }
        sleep 0.5
        C=$(ctrl_of "$nqn") && { fail "controller $C left behind after the refused connect"; return 1; }
        echo "refused as expected (nvme connect rc=$rc)"
        return 0
    fi
    [ $rc = 0 ] || { dmesg | tail -n 20; fail "nvme connect exited $rc"; return 1; }
    i=0; C=""; N=""
    while [ $i -lt 150 ]; do
        C=$(ctrl_of "$nqn"); N=$(ns_of "$C")
        [ -n "$C" ] && [ -n "$N" ] && break
        sleep 0.1; i=$((i + 1))
    done
    [ -n "$C" ] && [ -n "$N" ] || { nvme list; fail "controller/namespace did not appear"; return 1; }
    echo "controller $C ($(cat /sys/class/nvme/$C/state)), namespace /dev/$N"
    dmesg | grep -i 'authenticat' | tail -n 8
    dmesg | grep -q "$C: qid 0: authenticated" || { fail "dmesg has no 'qid 0: authenticated' for $C"; return 1; }
    if [ -n "$want" ]; then dmesg | grep -q "$want" || { fail "dmesg does not show '$want'"; return 1; }; fi
    if [ -n "$ckey" ]; then dmesg | grep -q "$C: qid 0: controller authenticated" || { fail "no 'controller authenticated' (bidirectional)"; return 1; }; fi
    fio --name=verify --filename=/dev/$N --rw=randwrite --bs=4k --size=2M --verify=crc32c --do_verify=1 \
        --direct=1 --ioengine=libaio --iodepth=8 --eta=never --output=/tmp/fio.out; frc=$?
    grep -E 'err=|IOPS' /tmp/fio.out | head -n 4
    [ $frc = 0 ] && grep -q 'err= 0' /tmp/fio.out || { tail -n 20 /tmp/fio.out; fail "fio verify failed ($frc)"; return 1; }
    nvme disconnect -d "$C" || { fail "nvme disconnect exited $?"; return 1; }
}

for c in $CASES; do
    echo "@@STEP $c BEGIN"
    run_case "$c" > /tmp/case.out 2>&1; rc=$?
    cat /tmp/case.out
    if [ $rc = 0 ]; then echo "@@STEP $c PASS"; else echo "--- dmesg"; dmesg | tail -n 20; echo "@@STEP $c FAIL rc=$rc"; FAILED="$FAILED $c"; fi
done

# nvme-cli's own keys: gen-dhchap-key output must pass check-dhchap-key (parsed by the host side too).
echo "@@GENKEY $(nvme gen-dhchap-key --hmac=2 --nqn="$SUBNQN")"
[ -z "$FAILED" ] || { echo "failed:$FAILED"; exit 1; }
echo "all cases passed"
