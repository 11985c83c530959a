#!/bin/sh
# Guest script of test/interop/tls-concat-kernel.test.ts (trixie userland on the newest Debian kernel, tls7-lab.sh):
# the Linux host runs `nvme connect --concat` with a DH-HMAC-CHAP secret against our target (secure channel
# concatenation, TP 8018): DH-HMAC-CHAP NEWTLSPSK on a cleartext admin queue, then TLS on the generated PSK (tlshd),
# fio verify, `nvme reset` (a new PSK, a new handshake), fio verify again, disconnect.
# Steps print  @@STEP <name> BEGIN ... @@STEP <name> PASS | FAIL rc=<n>.  Environment: SUBNQN, HOSTNQN, HOSTID, SECRET.
A=${LAB_GUESTFWD_IP:-10.0.2.100}
P=${LAB_GUESTFWD_PORT:-4420}
echo 10 > /sys/module/nvme_core/parameters/admin_timeout
echo "$A nvme-tcp-ts-target" >> /etc/hosts
printf 'options timeout:1 attempts:1\n' > /etc/resolv.conf
[ -w /sys/module/nvme_tcp/parameters/tls_handshake_timeout ] && echo 30 > /sys/module/nvme_tcp/parameters/tls_handshake_timeout
uname -r; nvme version | head -n 2; tlshd --version 2>&1 | head -n 1

step() { echo "@@STEP $1 BEGIN"; }
pass() { echo "@@STEP $1 PASS"; }
failstep() { echo "@@STEP $1 FAIL rc=$2"; }
ctrl() { for c in /sys/class/nvme/nvme*; do [ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$SUBNQN" ] && { basename "$c"; return 0; }; done; return 1; }
ns() { for b in /sys/block/nvme*n1; do case ${b##*/} in nvme*c*) continue ;; esac; [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$SUBNQN" ] && { echo "/dev/${b##*/}"; return 0; }; done; return 1; }
keys() { grep -a 'NVMe1G' /proc/keys | sed 's/^/key: /'; }

step features
# nvme-fabrics lists the options this kernel takes; nvme-cli must know --concat too.
cat /dev/nvme-fabrics 2>/dev/null | tr ',' '\n' | grep -E '^(concat|tls|dhchap_secret)' | tr '\n' ' '; echo
if grep -q concat /dev/nvme-fabrics 2>/dev/null && nvme connect --help 2>&1 | grep -q -- '--concat'; then pass features; else
    echo "MISSING: kernel concat option: $(grep -c concat /dev/nvme-fabrics 2>/dev/null); nvme-cli --concat: $(nvme connect --help 2>&1 | grep -c -- '--concat')"
    failstep features 1
fi

step tlshd
(tlshd -s > /tmp/tlshd.log 2>&1 &) ; sleep 1
pgrep -x tlshd >/dev/null && pass tlshd || { cat /tmp/tlshd.log; failstep tlshd 1; }

step connect
dmesg -c >/dev/null
nvme connect -t tcp -a "$A" -s "$P" -n "$SUBNQN" --hostnqn="$HOSTNQN" --hostid="$HOSTID" --dhchap-secret="$SECRET" --concat \
    --nr-io-queues=2 --reconnect-delay=1 --ctrl-loss-tmo=60; rc=$?
dmesg | grep -i -E 'nvme|tls|handshake|concat' | tail -n 25
tail -n 20 /tmp/tlshd.log
keys
sleep 1
D=$(ns); C=$(ctrl)
[ -n "$C" ] && for f in tls_key tls_configured_key dhchap_secret; do [ -r /sys/class/nvme/$C/$f ] && echo "sysfs $f: $(cat /sys/class/nvme/$C/$f 2>&1 | cut -c1-12)..."; done
[ $rc = 0 ] && [ -n "$D" ] && pass connect || failstep connect $rc

if [ -n "$D" ]; then
    step fio
    fio --name=v --filename="$D" --rw=randwrite --bs=4k --size=8M --iodepth=8 --ioengine=libaio --direct=1 \
        --verify=crc32c --do_verify=1 --output-format=terse >/dev/null; rc=$?
    [ $rc = 0 ] && pass fio || failstep fio $rc

    # Re-authentication inside TLS (writing the secret starts it): SC_C REPLACETLSPSK, a new generated PSK for the next
    # connections; the open TLS sessions go on.
    step reauth
    dmesg -c >/dev/null
    printf '%s' "$SECRET" > /sys/class/nvme/$C/dhchap_secret; rc=$?
    sleep 3
    dmesg | grep -i -E 'nvme|auth|concat' | tail -n 6
    fio --name=v1 --filename="$D" --rw=randwrite --bs=4k --size=2M --iodepth=4 --ioengine=libaio --direct=1 \
        --verify=crc32c --do_verify=1 --output-format=terse >/dev/null; rc2=$?
    [ $rc = 0 ] && [ $rc2 = 0 ] && [ "$(cat /sys/class/nvme/$C/state)" = live ] && pass reauth || failstep reauth "$rc/$rc2"

    step reset
    K1=$(cat /sys/class/nvme/$C/tls_key 2>/dev/null)
    dmesg -c >/dev/null
    nvme reset /dev/$C; rc=$?
    i=0; while [ $i -lt 60 ]; do [ "$(cat /sys/class/nvme/$C/state)" = live ] && break; sleep 1; i=$((i+1)); done
    dmesg | grep -i -E 'nvme|tls|handshake|concat' | tail -n 10
    K2=$(cat /sys/class/nvme/$C/tls_key 2>/dev/null)
    echo "tls_key before $K1 after $K2"
    fio --name=v2 --filename="$D" --rw=randwrite --bs=4k --size=4M --iodepth=4 --ioengine=libaio --direct=1 \
        --verify=crc32c --do_verify=1 --output-format=terse >/dev/null; rc2=$?
    [ $rc = 0 ] && [ $rc2 = 0 ] && [ "$(cat /sys/class/nvme/$C/state)" = live ] && pass reset || failstep reset "$rc/$rc2"

    step disconnect
    nvme disconnect -n "$SUBNQN"; rc=$?
    [ $rc = 0 ] && pass disconnect || failstep disconnect $rc
fi
echo "@@DONE"
