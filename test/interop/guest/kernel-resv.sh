#!/bin/sh
# Guest script (busybox sh) of test/interop/kernel-resv.test.ts: two hosts (two host NQNs and host IDs) in one
# Linux guest run nvme-cli's resv-register / resv-acquire / resv-release / resv-report and read/write against one
# namespace, then (MASK=1) look at a masked namespace through `nvme list-ns` / `nvme list` of each controller.
#
# The kernel boots with nvme_core.multipath=N (run.sh --append), so each controller has its own block device
# (nvmeXnY): native multipath would merge the two hosts' paths into one head and send each command down either.
#
# Output, parsed by the test:
#   @@R <label> <status>          one per command: 0x0 on success, else the NVMe status (SCT<<8|SC) nvme-cli printed
#   @@REPORT <label> <json>       resv-report --eds -o json, on one line
#   @@STEP <name> BEGIN|PASS|FAIL  around each phase (as kernel-host.sh)
#   @@HOST <request>              the host must act (attach a host to a namespace), then the guest polls
#
# Environment: TARGETS  space-separated list of "ours" (guestfwd $LAB_GUESTFWD_IP:$LAB_GUESTFWD_PORT) and "nvmet"
# (the guest's own nvmet on 127.0.0.1:4420, namespace resv_enable=1); RESV_NQN, MASK_NQN; MASK=1 for the masking
# phase (ours only: nvmet has no masking).
RESV_NQN=${RESV_NQN:-nqn.2024-01.io.nvme-tcp-ts:resv}
MASK_NQN=${MASK_NQN:-nqn.2024-01.io.nvme-tcp-ts:mask}
H1=nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-7265737601
H2=nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-7265737602
I1=6c61622d-6e76-6d65-7463-726573760001
I2=6c61622d-6e76-6d65-7463-726573760002
FAILED=""
exec 3>&1   # the real stdout: @@HOST requests must reach the host while a step's output goes to a file

echo 10 > /sys/module/nvme_core/parameters/admin_timeout
echo 10 > /sys/module/nvme_core/parameters/io_timeout

step() {
    name=$1; shift
    echo "@@STEP $name BEGIN"
    "$@" > /tmp/step.out 2>&1
    rc=$?
    cat /tmp/step.out
    if [ $rc = 0 ]; then echo "@@STEP $name PASS"; else
        echo "--- dmesg (last 20 lines)"; dmesg | tail -n 20
        echo "@@STEP $name FAIL rc=$rc"; FAILED="$FAILED $name"; fi
    return $rc
}
fail() { echo "CHECK FAILED: $*"; return 1; }

# the live controller (nvmeX) of subsystem $1 connected as host NQN $2
ctrl_for() {
    for c in /sys/class/nvme/nvme*; do
        [ -e "$c/subsysnqn" ] || continue
        [ "$(cat "$c/subsysnqn")" = "$1" ] && [ "$(cat "$c/hostnqn")" = "$2" ] && [ "$(cat "$c/state")" = live ] \
            && { basename "$c"; return 0; }
    done
    return 1
}
# the block device of namespace $2 on controller $1 (multipath off: nvme<ctrl>n<N> under the controller)
ns_of() {
    for b in /sys/class/nvme/$1/$1n*; do
        [ -e "$b/nsid" ] && [ "$(cat "$b/nsid")" = "$2" ] && { basename "$b"; return 0; }
    done
    return 1
}
wait_ns() { # ctrl nsid: up to 20 s
    i=0; while [ $i -lt 200 ]; do ns_of "$1" "$2" >/dev/null && [ -b "/dev/$(ns_of "$1" "$2")" ] && return 0; sleep 0.1; i=$((i + 1)); done
    return 1
}
wait_no_ns() {
    i=0; while [ $i -lt 200 ]; do ns_of "$1" "$2" >/dev/null || return 0; sleep 0.1; i=$((i + 1)); done
    return 1
}

# r LABEL CMD...: run an nvme-cli command and print its status (nvme-cli prints "NVMe status: ...(0xNNNN)"; the
# low 11 bits are SCT and SC, the DNR/More bits are dropped)
r() {
    label=$1; shift
    "$@" > /tmp/r.out 2>&1
    rc=$?
    s=$(grep -o 'NVMe status:.*(0x[0-9a-fA-F]*)' /tmp/r.out | sed 's/.*(0x\([0-9a-fA-F]*\))$/\1/' | tail -n 1)
    if [ -n "$s" ]; then st=$(printf '0x%x' $((0x$s & 0x7ff))); elif [ $rc = 0 ]; then st=0x0; else st="rc$rc"; fi
    echo "@@R $label $st"
    [ "$st" = 0x0 ] || sed 's/^/    /' /tmp/r.out | head -n 3
    return 0
}
report() { # label dev
    nvme resv-report "/dev/$2" --eds -o json > /tmp/rep.out 2>&1 || { echo "@@REPORT $1 ERROR $(head -c 200 /tmp/rep.out | tr '\n' ' ')"; return 0; }
    echo "@@REPORT $1 $(tr -d '\n\t ' < /tmp/rep.out)"
}

setup_nvmet() {
    T=/sys/kernel/config/nvmet
    S=$T/subsystems/$RESV_NQN
    [ -d "$S" ] && return 0
    mkdir "$S" || return 1
    echo 1 > "$S/attr_allow_any_host"
    dd if=/dev/zero of=/tmp/resv.img bs=1M count=0 seek=16 2>/dev/null
    mkdir "$S/namespaces/1"
    printf '%s' /tmp/resv.img > "$S/namespaces/1/device_path"
    echo 1 > "$S/namespaces/1/buffered_io"
    [ -e "$S/namespaces/1/resv_enable" ] || fail "this nvmet has no resv_enable (reservations need Linux 6.13+)" || return 1
    echo 1 > "$S/namespaces/1/resv_enable" || return 1
    echo 1 > "$S/namespaces/1/enable" || return 1
    mkdir "$T/ports/1"
    echo tcp > "$T/ports/1/addr_trtype"; echo ipv4 > "$T/ports/1/addr_adrfam"
    echo 127.0.0.1 > "$T/ports/1/addr_traddr"; echo 4420 > "$T/ports/1/addr_trsvcid"
    ln -s "$S" "$T/ports/1/subsystems/$RESV_NQN"
}

connect_both() { # addr port nqn
    for h in 1 2; do
        eval "hn=\$H$h; hi=\$I$h"
        # straight to the kernel: nvme-cli 2.3 refuses a second controller of one subsystem at one address as
        # "already connected" even with another host NQN and --duplicate-connect; the kernel tells hosts apart
        echo "transport=tcp,traddr=$1,trsvcid=$2,nqn=$3,hostnqn=$hn,hostid=$hi,nr_io_queues=1" > /dev/nvme-fabrics \
            || fail "connect as host $h (write to /dev/nvme-fabrics) failed" || return 1
    done
    C1=$(ctrl_for "$3" "$H1") || fail "no live controller for host 1" || return 1
    C2=$(ctrl_for "$3" "$H2") || fail "no live controller for host 2" || return 1
    echo "host 1: $C1, host 2: $C2"
}

# The sequence: every status and report is printed, the test compares them with the spec's answers (and nvmet's).
resv_sequence() { # ctrl1 ctrl2 (nsid 1 on both)
    wait_ns "$1" 1 || fail "no nsid 1 on $1" || return 1
    wait_ns "$2" 1 || fail "no nsid 1 on $2" || return 1
    D1=$(ns_of "$1" 1); D2=$(ns_of "$2" 1)
    echo "host 1 /dev/$D1, host 2 /dev/$D2"
    dd if=/dev/urandom of=/tmp/blk bs=512 count=1 2>/dev/null
    w() { r "$1" nvme write "/dev/$2" -s 0 -c 0 -z 512 -d /tmp/blk; }
    rd() { r "$1" nvme read "/dev/$2" -s 0 -c 0 -z 512 -d /tmp/rblk; }
    report empty "$D1"
    r reg1 nvme resv-register "/dev/$D1" --nrkey=0xa1 --rrega=0
    r reg2 nvme resv-register "/dev/$D2" --nrkey=0xb2 --rrega=0
    r reg1-same nvme resv-register "/dev/$D1" --nrkey=0xa1 --rrega=0
    r reg2-other-key nvme resv-register "/dev/$D2" --nrkey=0xb3 --rrega=0
    report registered "$D2"
    r acq1-we nvme resv-acquire "/dev/$D1" --crkey=0xa1 --rtype=1 --racqa=0
    r acq1-wrong-key nvme resv-acquire "/dev/$D1" --crkey=0xa9 --rtype=1 --racqa=0
    r acq2-busy nvme resv-acquire "/dev/$D2" --crkey=0xb2 --rtype=1 --racqa=0
    report we-held "$D2"
    w write1-we "$D1"
    w write2-we "$D2"
    rd read2-we "$D2"
    r rel2-nonholder nvme resv-release "/dev/$D2" --crkey=0xb2 --rtype=1 --rrela=0
    r rel1-wrong-key nvme resv-release "/dev/$D1" --crkey=0xa9 --rtype=1 --rrela=0
    r rel1-wrong-type nvme resv-release "/dev/$D1" --crkey=0xa1 --rtype=2 --rrela=0
    r report-no-eds nvme resv-report "/dev/$D1"
    r rel1 nvme resv-release "/dev/$D1" --crkey=0xa1 --rtype=1 --rrela=0
    r acq1-ea nvme resv-acquire "/dev/$D1" --crkey=0xa1 --rtype=2 --racqa=0
    rd read2-ea "$D2"
    w write2-ea "$D2"
    rd read1-ea "$D1"
    r pre2-wero nvme resv-acquire "/dev/$D2" --crkey=0xb2 --prkey=0xa1 --rtype=3 --racqa=1
    report preempted "$D2"
    w write1-unreg "$D1"
    rd read1-unreg "$D1"
    r rel1-unreg nvme resv-release "/dev/$D1" --crkey=0xa1 --rtype=3 --rrela=0
    r rereg1 nvme resv-register "/dev/$D1" --nrkey=0xa1 --rrega=0
    w write1-wero-reg "$D1"
    r replace2 nvme resv-register "/dev/$D2" --crkey=0xb2 --nrkey=0xb4 --rrega=2
    r replace2-iekey nvme resv-register "/dev/$D2" --crkey=0xff --nrkey=0xb5 --rrega=2 --iekey
    r replace2-wrong-key nvme resv-register "/dev/$D2" --crkey=0xb2 --nrkey=0xb6 --rrega=2
    report replaced "$D1"
    r rel2-wero nvme resv-release "/dev/$D2" --crkey=0xb5 --rtype=3 --rrela=0
    report released "$D1"
    r acq2-earo nvme resv-acquire "/dev/$D2" --crkey=0xb5 --rtype=4 --racqa=0
    rd read1-earo "$D1"
    r unreg2-holder nvme resv-register "/dev/$D2" --crkey=0xb5 --rrega=1
    report holder-gone "$D1"
    r clear1 nvme resv-release "/dev/$D1" --crkey=0xa1 --rrela=1
    r unreg2-after-clear nvme resv-register "/dev/$D2" --crkey=0xb5 --rrega=1
    report cleared "$D2"
    w write2-free "$D2"
    return 0
}

disconnect_nqn() { nvme disconnect -n "$1" >/dev/null 2>&1; return 0; }

resv_against() { # which addr port
    echo "@@TARGET $1"
    step "$1-connect" connect_both "$2" "$3" "$RESV_NQN" || { disconnect_nqn "$RESV_NQN"; return 1; }
    [ "$1" = ours ] && echo "@@HOST where" >&3    # the host notes which worker serves each controller's queue
    step "$1-sequence" resv_sequence "$C1" "$C2"
    step "$1-disconnect" disconnect_nqn "$RESV_NQN"
}

list_ns_of() { nvme list-ns "/dev/$1" 2>&1 | sed -n 's/^\[ *[0-9]*\]:0x\([0-9a-f]*\)$/\1/p' | tr '\n' ' '; }

mask_initial() {
    connect_both "$LAB_GUESTFWD_IP" "$LAB_GUESTFWD_PORT" "$MASK_NQN" || return 1
    MC1=$C1; MC2=$C2
    wait_ns "$MC1" 2 || fail "host 1 does not see nsid 2 (attached to it)" || return 1
    wait_ns "$MC1" 1 && wait_ns "$MC2" 1 || fail "nsid 1 (no host list) is not seen by both" || return 1
    l1=$(list_ns_of "$MC1"); l2=$(list_ns_of "$MC2")
    echo "list-ns host 1: $l1; host 2: $l2"
    nvme list
    [ "$l1" = "1 2 " ] || fail "host 1 list-ns is '$l1', want '1 2 '" || return 1
    [ "$l2" = "1 " ] || fail "host 2 list-ns is '$l2', want '1 '" || return 1
    ns_of "$MC2" 2 && fail "host 2 has a block device for nsid 2" && return 1
    nvme id-ns "/dev/$MC2" -n 2 > /tmp/idn.out 2>&1
    grep -q 'NVMe status' /tmp/idn.out && { cat /tmp/idn.out; fail "id-ns of the hidden nsid failed instead of returning zeros"; return 1; }
    nsze=$(awk '/^nsze/{print $3}' /tmp/idn.out)
    [ "$((nsze))" = 0 ] || fail "host 2: id-ns 2 nsze is $nsze, want 0 (not attached)" || return 1
}

mask_attach() {
    echo "@@HOST attach 2 $H2" >&3
    wait_ns "$MC2" 2 || fail "nsid 2 did not appear on host 2 within 20 s after the attach (namespace-changed AEN, rescan)" || return 1
    echo "list-ns host 2: $(list_ns_of "$MC2")"
    nvme list
    nvme read "/dev/$(ns_of "$MC2" 2)" -s 0 -c 0 -z 512 -d /tmp/rblk || fail "read of nsid 2 by host 2 after the attach failed" || return 1
}

mask_detach() {
    echo "@@HOST detach 2 $H1" >&3
    wait_no_ns "$MC1" 2 || fail "nsid 2 is still on host 1 20 s after the detach" || return 1
    echo "list-ns host 1: $(list_ns_of "$MC1"); host 2: $(list_ns_of "$MC2")"
    ns_of "$MC2" 2 >/dev/null || fail "host 2 lost nsid 2 after host 1's detach" || return 1
}

for t in ${TARGETS:-ours}; do
    case $t in
        nvmet) step nvmet-setup setup_nvmet && resv_against nvmet 127.0.0.1 4420 ;;
        ours) resv_against ours "$LAB_GUESTFWD_IP" "$LAB_GUESTFWD_PORT" ;;
    esac
done
if [ "${MASK:-0}" = 1 ]; then
    step mask-initial mask_initial && step mask-attach mask_attach && step mask-detach mask_detach
    disconnect_nqn "$MASK_NQN"
fi
[ -z "$FAILED" ] || { echo "failed steps:$FAILED"; exit 1; }
exit 0
