#!/bin/sh
# Guest script (busybox sh) of test/interop/kernel-host.test.ts: the Linux 6.1 kernel host (nvme-tcp,
# nvme-cli, fio) against an NVMe/TCP target reached at $TARGET_IP:$TARGET_PORT (qemu guestfwd to our
# TypeScript target on the host). Every step prints
#   @@STEP <name> BEGIN  ...output...  @@STEP <name> PASS   |   @@STEP <name> FAIL rc=<n>
# and the script exits non-zero when any step failed. On failure the step's output tail and
# `dmesg | tail` are printed, so the vitest case of that step shows why.
#
# Environment (run.sh --env):
#   NQN              subsystem NQN with two namespaces: nsid 1 (RAM) and nsid 2 (file)
#   TARGET_IP/PORT   where the target is reachable (default $LAB_GUESTFWD_IP/$LAB_GUESTFWD_PORT)
#   ADVERTISED       "IP:PORT" the discovery log must show (default TARGET_IP:TARGET_PORT)
#   KERNEL_TARGET=1  serve the same layout from the guest's own nvmet on 127.0.0.1:4420 instead
#                    (to check this script against the reference implementation)
#   FIO_SIZE         bytes per fio verify job (default 16M)
#   SKIP_STEPS       space-separated step names to skip
#   DIGESTS=1        the plain connect asks for header and data digests too (-g -G)
A=${TARGET_IP:-${LAB_GUESTFWD_IP:-10.0.2.100}}
P=${TARGET_PORT:-${LAB_GUESTFWD_PORT:-4420}}
NQN=${NQN:-nqn.2024-01.io.nvme-tcp-ts:interop}
FIO_SIZE=${FIO_SIZE:-16M}
FAILED=""
NSTEPS=0

# Fail in seconds, not minutes, when the target does not answer (defaults: admin 60 s, I/O 30 s).
echo 10 > /sys/module/nvme_core/parameters/admin_timeout
echo 10 > /sys/module/nvme_core/parameters/io_timeout

if [ "${KERNEL_TARGET:-0}" = 1 ]; then
    A=127.0.0.1; P=4420
    T=/sys/kernel/config/nvmet
    S=$T/subsystems/$NQN
    mkdir "$S"
    echo 1 > "$S/attr_allow_any_host"
    for n in 1 2; do
        dd if=/dev/zero of=/tmp/ns$n.img bs=1M count=0 seek=64 2>/dev/null
        mkdir "$S/namespaces/$n"
        printf '%s' /tmp/ns$n.img > "$S/namespaces/$n/device_path"
        echo 1 > "$S/namespaces/$n/buffered_io"     # tmpfs refuses O_DIRECT
        echo 1 > "$S/namespaces/$n/enable"
    done
    mkdir "$T/ports/1"
    echo tcp > "$T/ports/1/addr_trtype"; echo ipv4 > "$T/ports/1/addr_adrfam"
    echo $A > "$T/ports/1/addr_traddr"; echo $P > "$T/ports/1/addr_trsvcid"
    ln -s "$S" "$T/ports/1/subsystems/$NQN"
fi
ADVERTISED=${ADVERTISED:-$A:$P}

# step NAME CMD...: run CMD (a shell function or command) with output to a file; print markers.
step() {
    name=$1; shift
    NSTEPS=$((NSTEPS + 1))
    case " ${SKIP_STEPS:-} " in *" $name "*) echo "@@STEP $name SKIP"; return 0 ;; esac
    echo "@@STEP $name BEGIN"
    t0=$(cut -d' ' -f1 /proc/uptime)
    "$@" > /tmp/step.out 2>&1
    rc=$?
    t1=$(cut -d' ' -f1 /proc/uptime)
    secs=$(awk "BEGIN{printf \"%.1f\", $t1-$t0}")
    if [ $rc = 0 ]; then
        tail -n 25 /tmp/step.out
        echo "@@STEP $name PASS ${secs}s"
    else
        tail -n 60 /tmp/step.out
        echo "--- dmesg (last 25 lines)"
        dmesg | tail -n 25
        echo "@@STEP $name FAIL rc=$rc ${secs}s"
        FAILED="$FAILED $name"
    fi
    return $rc
}

# --- helpers (run inside steps; non-zero exit = step failure) -----------------------------------
fail() { echo "CHECK FAILED: $*"; return 1; }

# the live I/O controller of $NQN (nvmeX), empty if none
ctrl_of() {
    for c in /sys/class/nvme/nvme*; do
        [ -e "$c/subsysnqn" ] || continue
        [ "$(cat "$c/subsysnqn")" = "$NQN" ] && [ "$(cat "$c/state")" = live ] && { basename "$c"; return 0; }
    done
    return 1
}

# the block device (nvmeXnY) of namespace $1 of $NQN, empty if none
ns_dev() {
    for b in /sys/block/nvme*n*; do
        case ${b##*/} in nvme*c*) continue ;; esac      # nvmeXcYnZ: a multipath member, not a disk
        [ -e "$b/nsid" ] || continue
        [ "$(cat "$b/nsid")" = "$1" ] || continue
        [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NQN" ] && { basename "$b"; return 0; }
    done
    return 1
}

# wait up to 15 s for the controller and both namespaces
wait_devices() {
    i=0
    while [ $i -lt 150 ]; do
        C=$(ctrl_of); N1=$(ns_dev 1); N2=$(ns_dev 2)
        [ -n "$C" ] && [ -n "$N1" ] && [ -n "$N2" ] && [ -b "/dev/$N1" ] && [ -b "/dev/$N2" ] && {
            echo "controller $C, nsid 1 = /dev/$N1, nsid 2 = /dev/$N2"; return 0; }
        sleep 0.1; i=$((i + 1))
    done
    echo "controller=${C:-none} ns1=${N1:-none} ns2=${N2:-none}"; nvme list; return 1
}

do_discover() {
    nvme discover -t tcp -a "$A" -s "$P" > /tmp/disc.out 2>&1; rc=$?
    cat /tmp/disc.out
    [ $rc = 0 ] || fail "nvme discover exited $rc" || return 1
    grep -q "subnqn: *$NQN" /tmp/disc.out || fail "no discovery entry for $NQN" || return 1
    grep -q "subtype: *current discovery subsystem" /tmp/disc.out || fail "no entry for the discovery subsystem itself (SUBTYPE 3)" || return 1
    grep -q "traddr: *${ADVERTISED%:*}\$" /tmp/disc.out || fail "entries do not advertise traddr ${ADVERTISED%:*}" || return 1
    grep -q "trsvcid: *${ADVERTISED##*:}\$" /tmp/disc.out || fail "entries do not advertise trsvcid ${ADVERTISED##*:}" || return 1
    grep -q "treq: *not specified, sq flow control disable supported" /tmp/disc.out \
        || echo "note: TREQ does not offer SQ flow control disable"
}

do_connect() {
    # $@: extra nvme connect flags
    nvme connect -t tcp -a "$A" -s "$P" -n "$NQN" --nr-io-queues 2 "$@" || fail "nvme connect exited $?" || return 1
    wait_devices || fail "controller/namespaces did not appear within 15 s" || return 1
    C=$(ctrl_of)
    dmesg | grep "nvme $C:\|nvme nvme" | tail -n 4
    q=$(dmesg | grep "nvme $C: mapped" | tail -n 1)
    echo "$q" | grep -q "mapped 2/0/0" || fail "expected 2 I/O queues: '$q'" || return 1
    echo "state=$(cat /sys/class/nvme/$C/state) transport=$(cat /sys/class/nvme/$C/transport) address=$(cat /sys/class/nvme/$C/address)"
}

do_id_ctrl() {
    C=$(ctrl_of) || fail "no live controller" || return 1
    nvme id-ctrl /dev/$C > /tmp/idc.out || fail "nvme id-ctrl exited $?" || return 1
    grep -E '^(vid|sn|mn|fr|mdts|cntlid|ver|cmic|oacs|lpa|sqes|cqes|maxcmd|nn|oncs|vwc|sgls|subnqn|ioccsz|iorcsz|icdoff|msdbd|kas|anacap|anagrpmax|nanagrpid) ' /tmp/idc.out
    grep -q "^subnqn *: $NQN\$" /tmp/idc.out || fail "subnqn is not $NQN" || return 1
    nn=$(awk '/^nn /{print $3}' /tmp/idc.out)
    [ "$((nn))" -ge 2 ] || fail "nn is $nn, want >= 2 (nvmet reports 1024)" || return 1
    grep -q "^cntlid *: $(cat /sys/class/nvme/$C/cntlid)" /tmp/idc.out \
        || grep -q "^cntlid *: 0x$(printf '%x' "$(cat /sys/class/nvme/$C/cntlid)")\$" /tmp/idc.out || fail "cntlid differs from sysfs" || return 1
}

do_id_ns() {
    N=$(ns_dev 1) || fail "no nsid 1 device" || return 1
    nvme id-ns /dev/$N > /tmp/idn.out || fail "nvme id-ns exited $?" || return 1
    grep -E '^(nsze|ncap|nuse|nlbaf|flbas|nmic|anagrpid|nguid|eui64|lbaf)' /tmp/idn.out
    nsze=$(awk '/^nsze/{print $3}' /tmp/idn.out)
    [ -n "$nsze" ] && [ "$((nsze))" -gt 0 ] || fail "nsze is 0" || return 1
    bytes=$(( $(cat /sys/block/$N/size) * 512 ))
    echo "block device size: $bytes bytes, logical block size $(cat /sys/block/$N/queue/logical_block_size)"
}

do_ns_descs() {
    for nsid in 1 2; do
        N=$(ns_dev $nsid) || fail "no nsid $nsid device" || return 1
        nvme ns-descs /dev/$N > /tmp/nd.out || fail "nvme ns-descs /dev/$N exited $?" || return 1
        cat /tmp/nd.out
        # nvmet always reports a UUID (generated) and an NGUID only when configured; we want at least one id
        grep -q '^uuid\|^nguid\|^eui64' /tmp/nd.out || fail "nsid $nsid: no UUID/NGUID/EUI-64 descriptor" || return 1
        grep -q '^csi *: 0' /tmp/nd.out || echo "note: nsid $nsid has no CSI descriptor (fine while CAP.CSS bit 43 is clear)"
    done
    [ "$(cat /sys/block/$(ns_dev 1)/uuid 2>/dev/null)" != "$(cat /sys/block/$(ns_dev 2)/uuid 2>/dev/null)" ] \
        || fail "the two namespaces have the same UUID" || return 1
}

do_smart_log() {
    C=$(ctrl_of) || fail "no live controller" || return 1
    nvme smart-log /dev/$C || fail "nvme smart-log exited $?"
}

do_logs() {
    C=$(ctrl_of) || fail "no live controller" || return 1
    nvme error-log /dev/$C -e 4 > /tmp/el.out || fail "nvme error-log exited $?" || return 1
    head -n 12 /tmp/el.out
    nvme fw-log /dev/$C || fail "nvme fw-log exited $?" || return 1
    nvme get-feature /dev/$C -f 7 || fail "nvme get-feature (number of queues) exited $?" || return 1
    if grep -q '^cmic.*0x[0-9a-f]*[89a-f]$' /tmp/idc.out 2>/dev/null || nvme id-ctrl /dev/$C | grep -q '^cmic *: 0x[0-9a-f]*[89a-f]$'; then
        nvme ana-log /dev/$C || fail "nvme ana-log exited $? (CMIC advertises ANA)" || return 1
    fi
}

# fio_verify NSID BS SIZE: random writes with crc32c verification read back
fio_verify() {
    N=$(ns_dev "$1") || fail "no nsid $1 device" || return 1
    fio --name=verify-ns$1-$2 --filename=/dev/$N --rw=randwrite --bs="$2" --size="$3" \
        --verify=crc32c --do_verify=1 --direct=1 --ioengine=libaio --iodepth=8 --eta=never \
        --output=/tmp/fio.out; rc=$?
    grep -E 'err=|IOPS|verify|crc' /tmp/fio.out | head -n 12
    [ $rc = 0 ] || { tail -n 30 /tmp/fio.out; fail "fio exited $rc"; return 1; }
    grep -q 'err= 0' /tmp/fio.out || fail "fio reported errors" || return 1
}

do_flush() {
    for nsid in 1 2; do
        N=$(ns_dev $nsid) || fail "no nsid $nsid device" || return 1
        nvme flush /dev/$N -n $nsid || fail "nvme flush /dev/$N exited $?" || return 1
    done
}

do_discard() {
    N=$(ns_dev 2) || fail "no nsid 2 device" || return 1
    max=$(cat /sys/block/$N/queue/discard_max_bytes)
    echo "discard_max_bytes=$max"
    if [ "$max" -gt 0 ]; then
        blkdiscard -o 0 -l 1048576 /dev/$N || fail "blkdiscard exited $?" || return 1
    else
        echo "the kernel did not enable discard (ONCS without DSM?); trying nvme dsm --ad directly"
    fi
    nvme dsm /dev/$N -n 2 --ad -s 256 -b 256 || fail "nvme dsm --ad exited $?"
}

do_write_zeroes() {
    N=$(ns_dev 2) || fail "no nsid 2 device" || return 1
    lbs=$(cat /sys/block/$N/queue/logical_block_size)
    # 16 KiB at byte 256 KiB: fill with random data, zero it with Write Zeroes, read it back
    dd if=/dev/urandom of=/tmp/rand bs=4096 count=4 2>/dev/null
    dd if=/tmp/rand of=/dev/$N bs=4096 count=4 seek=64 conv=fsync 2>/dev/null || fail "dd write" || return 1
    nvme write-zeroes /dev/$N -n 2 -s $((262144 / lbs)) -c $((16384 / lbs - 1)) || fail "nvme write-zeroes exited $?" || return 1
    # the passthrough command bypassed the page cache: drop it before reading back
    echo 3 > /proc/sys/vm/drop_caches
    dd if=/dev/zero of=/tmp/zero bs=4096 count=4 2>/dev/null
    dd if=/dev/$N of=/tmp/back bs=4096 count=4 skip=64 2>/dev/null || fail "dd read" || return 1
    cmp /tmp/back /tmp/zero || fail "data is not zero after Write Zeroes" || return 1
    echo "16 KiB at 256 KiB read back as zeroes"
}

# NVM commands through nvme-cli's passthrough (docs/target.md, "NVM commands"), on the file namespace.
do_verify() {
    N=$(ns_dev 2) || fail "no nsid 2 device" || return 1
    nvme verify /dev/$N -n 2 -s 0 -c 7 || fail "nvme verify exited $?"
}

# one block at 1 MiB marked: a direct read of exactly that block fails with a media error, its neighbours read, a
# write clears it
do_write_uncor() {
    N=$(ns_dev 2) || fail "no nsid 2 device" || return 1
    lbs=$(cat /sys/block/$N/queue/logical_block_size)
    b=$((1048576 / lbs))
    nvme write-uncor /dev/$N -n 2 -s $b -c 0 || fail "nvme write-uncor exited $?" || return 1
    ! dd if=/dev/$N of=/dev/null bs=$lbs count=1 skip=$b iflag=direct 2>/tmp/dd.err || fail "the marked block read" || return 1
    # Linux maps Unrecovered Read Error to BLK_STS_MEDIUM: read(2) fails with ENODATA ("No data available")
    grep -Ei "no data available|input/output error" /tmp/dd.err || fail "no media error: $(cat /tmp/dd.err)" || return 1
    dmesg | grep "@ LBA $b, 1 blocks" | grep -q "sct 0x2 / sc 0x81" || fail "dmesg does not name LBA $b with sct 2 / sc 0x81" || return 1
    dd if=/dev/$N of=/dev/null bs=$lbs count=1 skip=$((b - 1)) iflag=direct 2>/dev/null || fail "the block before it failed" || return 1
    dd if=/dev/$N of=/dev/null bs=$lbs count=1 skip=$((b + 1)) iflag=direct 2>/dev/null || fail "the block after it failed" || return 1
    dd if=/dev/zero of=/dev/$N bs=$lbs count=1 seek=$b oflag=direct 2>/dev/null || fail "rewriting it failed" || return 1
    dd if=/dev/$N of=/dev/null bs=$lbs count=1 skip=$b iflag=direct 2>/dev/null || fail "still unreadable after the write" || return 1
    echo "media error on exactly LBA $b until rewritten"
}

# 4 KiB at 2 MiB: compare with the same data passes, with other data fails
do_compare() {
    N=$(ns_dev 2) || fail "no nsid 2 device" || return 1
    lbs=$(cat /sys/block/$N/queue/logical_block_size)
    dd if=/dev/urandom of=/tmp/cmp bs=4096 count=1 2>/dev/null
    dd if=/tmp/cmp of=/dev/$N bs=4096 count=1 seek=512 oflag=direct 2>/dev/null || fail "dd write" || return 1
    nvme compare /dev/$N -n 2 -s $((2097152 / lbs)) -c $((4096 / lbs - 1)) -z 4096 -d /tmp/cmp || fail "compare of equal data exited $?" || return 1
    dd if=/dev/urandom of=/tmp/other bs=4096 count=1 2>/dev/null
    ! nvme compare /dev/$N -n 2 -s $((2097152 / lbs)) -c $((4096 / lbs - 1)) -z 4096 -d /tmp/other || fail "compare of other data passed" || return 1
    echo "compare: equal passes, different fails"
}

# Copy the 4 KiB at 2 MiB (do_compare's) to 3 MiB, in descriptor formats 0 and 1
do_copy() {
    N=$(ns_dev 2) || fail "no nsid 2 device" || return 1
    lbs=$(cat /sys/block/$N/queue/logical_block_size)
    for f in 0 1; do
        dst=$((3145728 + f * 65536))
        nvme copy /dev/$N -n 2 --sdlba=$((dst / lbs)) --slbs=$((2097152 / lbs)) --blocks=$((4096 / lbs - 1)) --format=$f || fail "nvme copy --format=$f exited $?" || return 1
        dd if=/dev/$N of=/tmp/back bs=4096 count=1 skip=$((dst / 4096)) iflag=direct 2>/dev/null || fail "dd read" || return 1
        cmp /tmp/back /tmp/cmp || fail "format $f: the copy differs from its source" || return 1
    done
    echo "copy formats 0 and 1 reproduce the source"
}

# Format NVM to 4096-byte LBAs and back: the host revalidates the namespace (the namespace-changed AEN, nvme-cli's
# rescan) and its block device takes the new logical block size and the same byte capacity
do_format() {
    N=$(ns_dev 2) || fail "no nsid 2 device" || return 1
    bytes=$(( $(cat /sys/block/$N/size) * 512 ))
    for want in 4096 512; do
        lbaf=$([ $want = 4096 ] && echo 1 || echo 0)
        nvme format /dev/$N -n 2 --lbaf=$lbaf --force || fail "nvme format --lbaf=$lbaf exited $?" || return 1
        i=0; while [ $i -lt 50 ] && [ "$(cat /sys/block/$N/queue/logical_block_size)" != $want ]; do sleep 0.1; i=$((i + 1)); done
        lbs=$(cat /sys/block/$N/queue/logical_block_size)
        echo "lbaf $lbaf: logical_block_size $lbs, $(( $(cat /sys/block/$N/size) * 512 )) bytes"
        [ "$lbs" = $want ] || fail "logical_block_size $lbs after --lbaf=$lbaf, want $want" || return 1
        [ $(( $(cat /sys/block/$N/size) * 512 )) = $bytes ] || fail "capacity changed" || return 1
    done
}

# fio jobs that write a pattern before the reset and verify it after (--verify_only replays the seeds)
fio_pattern() {
    N=$(ns_dev 2) || fail "no nsid 2 device" || return 1
    fio --name=persist --filename=/dev/$N --rw=write --bs=64k --size=4M --offset=32M \
        --verify=crc32c --direct=1 --ioengine=libaio --iodepth=4 --eta=never "$@" --output=/tmp/fio.out; rc=$?
    grep -E 'err=|verify' /tmp/fio.out | head -n 4
    [ $rc = 0 ] || { tail -n 20 /tmp/fio.out; fail "fio exited $rc"; }
}

do_reset() {
    fio_pattern --do_verify=0 || return 1
    C=$(ctrl_of) || fail "no live controller" || return 1
    nvme reset /dev/$C || fail "nvme reset exited $?" || return 1
    i=0
    while [ $i -lt 100 ] && [ "$(cat /sys/class/nvme/$C/state)" != live ]; do sleep 0.1; i=$((i + 1)); done
    echo "state after reset: $(cat /sys/class/nvme/$C/state)"
    [ "$(cat /sys/class/nvme/$C/state)" = live ] || fail "controller not live 10 s after reset" || return 1
    dmesg | grep "nvme $C" | tail -n 3
}

do_after_reset() {
    fio_pattern --verify_only || fail "data written before the reset does not verify" || return 1
    fio_verify 1 4k 4M
}

do_disconnect() {
    nvme disconnect -n "$NQN" > /tmp/dc.out 2>&1; rc=$?
    cat /tmp/dc.out
    [ $rc = 0 ] || fail "nvme disconnect exited $rc" || return 1
    grep -q "disconnected 1 controller" /tmp/dc.out || fail "expected 1 controller disconnected" || return 1
    i=0; while [ $i -lt 50 ] && ctrl_of > /dev/null; do sleep 0.1; i=$((i + 1)); done
    ! ctrl_of > /dev/null || fail "controller still present"
}

do_digest_check() {
    C=$(ctrl_of) || fail "no live controller" || return 1
    dmesg | grep -i "digest" | tail -n 5
    ! dmesg | grep -qi "digest error\|data digest\|header digest.*error" || fail "digest errors in dmesg"
}

echo "target $A:$P nqn $NQN (kernel $(uname -r), nvme-cli $(nvme version | awk '{print $3}'), $(fio --version))"
# DIGESTS=1 (NVME_TCP_TEST_DIGESTS=1 on the host side): the plain connect asks for header and data digests too.
[ "${DIGESTS:-0}" = 1 ] && PLAIN_DIGESTS="-g -G" || PLAIN_DIGESTS=""
step discover do_discover
# shellcheck disable=SC2086 # two flags or none
if step connect do_connect $PLAIN_DIGESTS; then
    step id-ctrl do_id_ctrl
    step id-ns do_id_ns
    step ns-descs do_ns_descs
    step smart-log do_smart_log
    step logs-features do_logs
    step fio-ram-4k fio_verify 1 4k "$FIO_SIZE"
    step fio-ram-128k fio_verify 1 128k "$FIO_SIZE"
    step fio-file-4k fio_verify 2 4k "$FIO_SIZE"
    step fio-file-128k fio_verify 2 128k "$FIO_SIZE"
    step flush do_flush
    step discard do_discard
    step write-zeroes do_write_zeroes
    step verify do_verify
    step write-uncor do_write_uncor
    step compare do_compare
    step copy do_copy
    step format do_format
    step reset do_reset && step io-after-reset do_after_reset
    step disconnect do_disconnect
fi
ctrl_of > /dev/null && nvme disconnect -n "$NQN" > /dev/null 2>&1     # leftovers of a failed step
if step connect-digests do_connect -g -G; then
    step fio-digests-4k fio_verify 1 4k 8M
    step fio-digests-128k fio_verify 2 128k 8M
    step digest-errors do_digest_check
    step disconnect-digests do_disconnect
fi
ctrl_of > /dev/null && nvme disconnect -n "$NQN" > /dev/null 2>&1
step no-controllers-left sh -c "! ls /sys/class/nvme/ 2>/dev/null | grep -q nvme || { ls -l /sys/class/nvme/; exit 1; }"

if [ -n "$FAILED" ]; then
    echo "@@RESULT FAIL:$FAILED"
    exit 1
fi
echo "@@RESULT PASS ($NSTEPS steps)"
exit 0
