#!/bin/sh
# Guest script (busybox sh) of test/interop/mgmt-parity.test.ts: the Linux 6.1 host against our target for the
# nvmet-parity management operations of issue 17. The target is at $A:$P (guestfwd), its management API at
# $API_IP:$API_PORT (a second guestfwd); the guest drives each change itself with a raw HTTP PUT over busybox nc
# (busybox wget only does GET/POST), so every change happens at a known point of the host's view.
# Subsystems: "testnqn" (nsid 1 and 2, RAM) and "blktests-subsystem-1" (nsid 1, cntlidMin 5, cntlidMax 6).
# Markers: @@STEP <name> BEGIN / PASS / FAIL rc=<n>, as guest/kernel-host.sh prints them.
# DIGESTS=1: every connect asks for header and data digests (-g -G).
A=${LAB_GUESTFWD_IP:-10.0.2.100}
P=${LAB_GUESTFWD_PORT:-4420}
API_IP=${API_IP:-10.0.2.100}
API_PORT=${API_PORT:-8080}
NQN=testnqn
NQN2=blktests-subsystem-1
FAILED=""
echo 10 > /sys/module/nvme_core/parameters/admin_timeout
echo 10 > /sys/module/nvme_core/parameters/io_timeout

step() {
    name=$1; shift
    echo "@@STEP $name BEGIN"
    "$@" > /tmp/step.out 2>&1; rc=$?
    if [ $rc = 0 ]; then tail -n 20 /tmp/step.out; echo "@@STEP $name PASS"
    else tail -n 50 /tmp/step.out; echo "--- dmesg"; dmesg | tail -n 20; echo "@@STEP $name FAIL rc=$rc"; FAILED="$FAILED $name"; fi
    return $rc
}
fail() { echo "CHECK FAILED: $*"; return 1; }

# api_put PATH JSON: HTTP PUT to the management API; prints the reply, fails unless it is 200
api_put() {
    len=$(printf '%s' "$2" | wc -c)
    printf 'PUT %s HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s' "$1" "$len" "$2" \
        | nc "$API_IP" "$API_PORT" > /tmp/api.out 2>&1
    head -n 1 /tmp/api.out
    grep -q '^HTTP/1.1 200' /tmp/api.out || { cat /tmp/api.out; return 1; }
}

ctrl_of() {  # $1 = subsystem NQN: first live controller
    for c in /sys/class/nvme/nvme*; do
        [ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$1" ] && [ "$(cat "$c/state")" = live ] && { basename "$c"; return 0; }
    done
    return 1
}
ns_dev() {  # $1 = nsid of $NQN
    for b in /sys/block/nvme*n*; do
        case ${b##*/} in nvme*c*) continue ;; esac
        [ "$(cat "$b/nsid" 2>/dev/null)" = "$1" ] && [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NQN" ] && { basename "$b"; return 0; }
    done
    return 1
}
ns_uuid() { d=$(ns_dev "$1") && cat "/sys/block/$d/uuid"; }
# wait_for SECONDS CMD...: poll CMD every 0.2 s
wait_for() {
    n=$(( $1 * 5 )); shift; i=0
    while [ $i -lt $n ]; do "$@" > /dev/null 2>&1 && return 0; sleep 0.2; i=$((i + 1)); done
    return 1
}
has_uuid() { [ "$(ns_uuid "$1")" = "$2" ]; }
no_ns() { ! ns_dev "$1"; }

do_connect() {
    # shellcheck disable=SC2046 # two flags or none
    nvme connect -t tcp -a "$A" -s "$P" -n "$NQN" --nr-io-queues 2 --reconnect-delay 1 $([ "${DIGESTS:-0}" = 1 ] && echo -g -G) || fail "nvme connect -n $NQN exited $?" || return 1
    wait_for 15 ns_dev 2 && wait_for 5 ns_dev 1 || { nvme list; fail "namespaces of $NQN did not appear"; return 1; }
    C=$(ctrl_of "$NQN"); echo "controller $C subsysnqn $(cat /sys/class/nvme/$C/subsysnqn)"
    dmesg | grep "nvme $C: mapped" | tail -n 1 | grep -q "mapped 2/0/0" || fail "expected 2 I/O queues" || return 1
    nvme id-ctrl "/dev/$C" | grep -q "^subnqn *: $NQN\$" || fail "id-ctrl subnqn is not $NQN"
}

# fio verify on nsid 2 runs in the background while nsid 1 is switched off and on
do_disable_enable() {
    U1=$(ns_uuid 1); D2=$(ns_dev 2)
    fio --name=bg --filename=/dev/$D2 --rw=randwrite --bs=4k --size=8M --verify=crc32c --do_verify=1 --direct=1 \
        --ioengine=libaio --iodepth=4 --eta=never --output=/tmp/fio-bg.out & FIO=$!
    api_put /subsystems/$NQN/namespaces/1 '{"enabled":false}' || return 1
    wait_for 15 no_ns 1 || fail "nsid 1 still present 15 s after disable" || return 1
    echo "nsid 1 gone from the host"
    api_put /subsystems/$NQN/namespaces/1 '{"enabled":true}' || return 1
    wait_for 15 has_uuid 1 "$U1" || fail "nsid 1 did not come back with uuid $U1 (now '$(ns_uuid 1)')" || return 1
    echo "nsid 1 back, uuid $U1"
    wait $FIO; rc=$?
    grep -E 'err=|verify' /tmp/fio-bg.out | head -n 4
    [ $rc = 0 ] && grep -q 'err= 0' /tmp/fio-bg.out || fail "fio on nsid 2 failed while nsid 1 was disabled/enabled (rc $rc)"
}

# the nvmet way to re-map: disable, change backend + uuid, enable
do_remap_disabled() {
    NEW=6d61702d-0001-4000-8000-000000000001
    api_put /subsystems/$NQN/namespaces/1 '{"enabled":false}' || return 1
    wait_for 15 no_ns 1 || fail "nsid 1 still present after disable" || return 1
    api_put /subsystems/$NQN/namespaces/1 "{\"backend\":{\"type\":\"ram\",\"size\":\"32M\"},\"uuid\":\"$NEW\",\"enabled\":false}" || return 1
    api_put /subsystems/$NQN/namespaces/1 '{"enabled":true}' || return 1
    wait_for 15 has_uuid 1 "$NEW" || fail "nsid 1 did not come back with uuid $NEW (now '$(ns_uuid 1)')" || return 1
    D=$(ns_dev 1); echo "nsid 1 = /dev/$D uuid $NEW size $(( $(cat /sys/block/$D/size) * 512 ))"
    [ "$(cat /sys/block/$D/size)" = 65536 ] || fail "size is not the new 32M backend"
}

# re-map while enabled: the AEN makes the host drop the stale namespace; 6.1 re-adds it on the next scan
do_remap_live() {
    OLD=$(ns_uuid 1); NEW=6d61702d-0002-4000-8000-000000000002
    api_put /subsystems/$NQN/namespaces/1 "{\"backend\":{\"type\":\"ram\",\"size\":\"16M\"},\"uuid\":\"$NEW\"}" || return 1
    wait_for 15 sh -c "[ \"\$(cat /sys/block/*/uuid 2>/dev/null | grep -c $OLD)\" = 0 ]" || fail "the host still shows the old uuid $OLD" || return 1
    if ! wait_for 5 has_uuid 1 "$NEW"; then
        echo "note: Linux 6.1 removed the namespace whose identifiers changed (nvme_validate_ns) and re-adds it on the next scan"
        nvme ns-rescan "/dev/$(ctrl_of "$NQN")"
        wait_for 15 has_uuid 1 "$NEW" || fail "nsid 1 with uuid $NEW did not appear after a rescan" || return 1
    fi
    echo "nsid 1 uuid now $(ns_uuid 1)"
}

do_qid_max() {
    C=$(ctrl_of "$NQN")
    api_put /subsystems/$NQN '{"maxIoQueues":1}' || return 1
    # the target disconnects the controller (nvmet attr_qid_max forces a reconnect); the host reconnects after 1 s
    wait_for 30 sh -c "dmesg | grep 'nvme $C: mapped' | tail -n 1 | grep -q 'mapped 1/0/0'" || { dmesg | grep "nvme $C" | tail; fail "host did not come back with 1 I/O queue"; return 1; }
    wait_for 15 ctrl_of "$NQN" || fail "controller not live again" || return 1
    dmesg | grep "nvme $C" | tail -n 4
    D2=$(ns_dev 2)
    fio --name=after --filename=/dev/$D2 --rw=randwrite --bs=4k --size=2M --verify=crc32c --do_verify=1 --direct=1 \
        --ioengine=libaio --iodepth=4 --eta=never --output=/tmp/fio.out || fail "fio after the queue change" || return 1
    grep -q 'err= 0' /tmp/fio.out || fail "fio errors after the queue change"
}

do_cntlid_range() {
    for h in 1 2 3; do
        id=6c61622d-6e76-6d65-7463-70000000010$h
        # straight to the kernel: nvme-cli 2.3 refuses a second controller to one subsystem and address ("already
        # connected") whatever the host NQN, even with --duplicate-connect
        echo "transport=tcp,traddr=$A,trsvcid=$P,nqn=$NQN2,hostnqn=nqn.2014-08.org.nvmexpress:uuid:$id,hostid=$id" > /dev/nvme-fabrics 2> /tmp/c$h.out
        echo "host $h: connect rc=$? $(cat /tmp/c$h.out)"
        [ $h = 3 ] && sleep 1
    done
    ids=""
    for c in /sys/class/nvme/nvme*; do [ "$(cat "$c/subsysnqn")" = "$NQN2" ] && ids="$ids $(cat "$c/cntlid")"; done
    echo "cntlids of $NQN2:$ids"
    [ "$(echo $ids | tr ' ' '\n' | sort | tr '\n' ' ')" = "5 6 " ] || fail "expected controllers 5 and 6 only" || return 1
    dmesg | grep -i "connect command failed" | tail -n 1
    nvme disconnect -n "$NQN2"
}

echo "kernel $(uname -r); target $A:$P; API $API_IP:$API_PORT"
if step connect-testnqn do_connect; then
    step disable-enable do_disable_enable
    step remap-disabled do_remap_disabled
    step remap-live do_remap_live
    step qid-max do_qid_max
fi
nvme disconnect -n "$NQN" > /dev/null 2>&1
step cntlid-range do_cntlid_range
nvme disconnect-all > /dev/null 2>&1
[ -z "$FAILED" ] || { echo "@@RESULT FAIL:$FAILED"; exit 1; }
echo "@@RESULT PASS"
