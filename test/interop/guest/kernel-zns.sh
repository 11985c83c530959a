#!/bin/sh
# Guest script (busybox sh) of test/interop/kernel-zns.test.ts: the Linux host against our zoned RAM (NSID 1) and
# zoned file (NSID 2) namespaces: the zoned block devices, `nvme zns report-zones` (JSON), fio --zonemode=zbd with
# crc32c verify on each, then the zone commands of nvme-cli (reset-zone, zone-append).
#
# Output, parsed by the test:
#   @@STEP <name> BEGIN|PASS|FAIL   around each phase
#   @@ZONES <label> <json>         nvme zns report-zones -o json on one line; the host reads its own zones as it
#                                  sees the line (the guest waits 2 s before the next command)
# Environment: ZNS_NQN; ZONE_SECTORS (zone size in 512-byte sectors); NR_ZONES (per namespace); DIGESTS=1: connect
# with header and data digests (-g -G)
FAILED=""
step() {
    name=$1; shift
    echo "@@STEP $name BEGIN"
    "$@" > /tmp/step.out 2>&1
    rc=$?
    cat /tmp/step.out
    if [ $rc = 0 ]; then echo "@@STEP $name PASS"; else
        echo "--- dmesg (last 30 lines)"; dmesg | tail -n 30
        echo "@@STEP $name FAIL rc=$rc"; FAILED="$FAILED $name"; fi
    return $rc
}
fail() { echo "CHECK FAILED: $*"; return 1; }

echo 30 > /sys/module/nvme_core/parameters/io_timeout
echo 30 > /sys/module/nvme_core/parameters/admin_timeout

dev_of() { # nsid: the block device of that namespace (multipath off)
    for b in /sys/class/nvme/nvme*/nvme*n*; do
        [ -e "$b/nsid" ] && [ "$(cat "$b/nsid")" = "$1" ] && { basename "$b"; return 0; }
    done
    return 1
}

connect() {
    # shellcheck disable=SC2046 # two flags or none
    nvme connect -t tcp -a "$LAB_GUESTFWD_IP" -s "$LAB_GUESTFWD_PORT" -n "$ZNS_NQN" -i 2 $([ "${DIGESTS:-0}" = 1 ] && echo -g -G) || return 1
    i=0; while [ $i -lt 300 ]; do dev_of 1 >/dev/null && dev_of 2 >/dev/null && break; sleep 0.1; i=$((i + 1)); done
    D1=$(dev_of 1) || fail "no block device for NSID 1" || return 1
    D2=$(dev_of 2) || fail "no block device for NSID 2" || return 1
    echo "NSID 1: $D1, NSID 2: $D2"
}

zoned_devs() { # the host revalidated both as host-managed zoned devices with our geometry
    for d in "$D1" "$D2"; do
        z=$(cat /sys/block/$d/queue/zoned); c=$(cat /sys/block/$d/queue/chunk_sectors); n=$(cat /sys/block/$d/queue/nr_zones)
        echo "$d: zoned=$z chunk_sectors=$c nr_zones=$n max_open=$(cat /sys/block/$d/queue/max_open_zones) append=$(cat /sys/block/$d/queue/zone_append_max_bytes 2>/dev/null)"
        [ "$z" = host-managed ] || fail "$d is not host-managed" || return 1
        [ "$c" = "$ZONE_SECTORS" ] || fail "$d zone size $c sectors" || return 1
        [ "$n" = "$NR_ZONES" ] || fail "$d has $n zones" || return 1
    done
    ro=$(cat /sys/block/$D1/ro); [ "$ro" = 0 ] || fail "$D1 is read-only (Zone Append not seen as supported)"
}

zones() { # label dev
    j=$(nvme zns report-zones "/dev/$2" -o json) || return 1
    echo "@@ZONES $1 $(echo "$j" | tr -d '\n')" >&3
    sleep 2
}

fio_seq() { # dev: a sequential write of every zone, verified with crc32c
    fio --name=seq --filename="/dev/$1" --direct=1 --ioengine=psync --zonemode=zbd --rw=write --bs=64k \
        --verify=crc32c --do_verify=1 --size=100% --minimal
}

fio_rand() { # dev: random writes within at most 4 open zones (fio resets full zones), verified with crc32c
    fio --name=rand --filename="/dev/$1" --direct=1 --ioengine=psync --zonemode=zbd --rw=randwrite --bs=16k \
        --max_open_zones=4 --io_size=2M --verify=crc32c --do_verify=1 --minimal
}

zone_cmds() {
    nvme zns reset-zone "/dev/$D1" -a || return 1
    head -c 4096 /dev/urandom > /tmp/blk
    out=$(nvme zns zone-append "/dev/$D1" -s "$ZONE_SECTORS" -z 4096 -d /tmp/blk) || return 1
    echo "$out"
    echo "$out" | grep -Eiq "lba (0x)?($(printf %x "$ZONE_SECTORS")|$ZONE_SECTORS)\b" || fail "append did not report LBA $ZONE_SECTORS"
    dd if="/dev/$D1" of=/tmp/back bs=4096 count=1 skip=$((ZONE_SECTORS / 8)) 2>/dev/null
    cmp /tmp/blk /tmp/back || fail "appended data not read back at the zone start"
}

exec 3>&1
step connect connect
step zoned-devices zoned_devs
step report-before zones before "$D1"
step fio-ram fio_seq "$D1"
step report-ram zones ram "$D1"
step fio-file fio_seq "$D2"
step report-file zones file "$D2"
step fio-rand-ram fio_rand "$D1"
step fio-rand-file fio_rand "$D2"
step zone-commands zone_cmds
step report-end zones end "$D1"
nvme disconnect -n "$ZNS_NQN" >/dev/null 2>&1
echo "FAILED:${FAILED}"
