#!/bin/sh
# Guest script of test/interop/tls-kernel.test.ts (trixie userland, tls-lab.sh): the Linux host with tlshd connects to
# our TypeScript target with `nvme connect --tls`, runs fio verify, survives a target restart (reconnect with a new
# handshake), disconnects. Steps print  @@STEP <name> BEGIN ... @@STEP <name> PASS | FAIL rc=<n>.
# Environment: SUBNQN, HOSTNQN, HOSTID, KEY (configured PSK, NVMeTLSkey-1:01:...:).
A=${LAB_GUESTFWD_IP:-10.0.2.100}
P=${LAB_GUESTFWD_PORT:-4420}
echo 10 > /sys/module/nvme_core/parameters/admin_timeout
# tlshd resolves the peer's name before the ClientHello; the lab has no DNS (slirp restrict=on), and a resolver timeout
# would eat the kernel's handshake budget: answer from /etc/hosts, and give slow TCG crypto more time.
echo "$A nvme-tcp-ts-target" >> /etc/hosts
printf 'options timeout:1 attempts:1\n' > /etc/resolv.conf
[ -w /sys/module/nvme_tcp/parameters/tls_handshake_timeout ] && echo 30 > /sys/module/nvme_tcp/parameters/tls_handshake_timeout
uname -r; nvme version | head -n 2; tlshd --version 2>&1 | head -n 1

step() { echo "@@STEP $1 BEGIN"; }
pass() { echo "@@STEP $1 PASS"; }
failstep() { echo "@@STEP $1 FAIL rc=$2"; }
ctrl() { for c in /sys/class/nvme/nvme*; do [ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$SUBNQN" ] && { basename "$c"; return 0; }; done; return 1; }
ns() { for b in /sys/block/nvme*n1; do case ${b##*/} in nvme*c*) continue ;; esac; [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$SUBNQN" ] && { echo "/dev/${b##*/}"; return 0; }; done; return 1; }

# nvme-cli's own derivations, for the unit comparison on the host side.
step nvmecli-derive
echo "GENKEY $(nvme gen-tls-key --hmac=1 --identity=1 --subsysnqn="$SUBNQN" --hostnqn="$HOSTNQN" 2>&1 | grep -o 'NVMeTLSkey-1:[^ ]*' | head -n 1)"
echo "IDENTITY1 $(nvme check-tls-key --keydata="$KEY" --subsysnqn="$SUBNQN" --hostnqn="$HOSTNQN" --identity=1 2>&1 | tr '\n' ' ')"
echo "IDENTITY0 $(nvme check-tls-key --keydata="$KEY" --subsysnqn="$SUBNQN" --hostnqn="$HOSTNQN" --identity=0 2>&1 | tr '\n' ' ')"
pass nvmecli-derive

step insert
keyctl show @u >/dev/null 2>&1
out=$(nvme check-tls-key --keydata="$KEY" --subsysnqn="$SUBNQN" --hostnqn="$HOSTNQN" --identity=0 --insert 2>&1); rc=$?
echo "$out"
grep -a 'psk' /proc/keys | sed 's/^/key: /'
[ $rc = 0 ] && pass insert || failstep insert $rc

step tlshd
(tlshd -s > /tmp/tlshd.log 2>&1 &) ; sleep 1
pgrep -x tlshd >/dev/null && pass tlshd || { cat /tmp/tlshd.log; failstep tlshd 1; }

step connect
cat /proc/sys/kernel/random/entropy_avail; dmesg | grep -i -E 'crng|random' | head -3
dmesg -c >/dev/null
nvme connect -t tcp -a "$A" -s "$P" -n "$SUBNQN" --hostnqn="$HOSTNQN" --hostid="$HOSTID" --tls --nr-io-queues=2 \
    --reconnect-delay=1 --ctrl-loss-tmo=60; rc=$?
dmesg | grep -i -E 'nvme|tls|handshake' | tail -n 20
tail -n 20 /tmp/tlshd.log
sleep 1
D=$(ns)
[ $rc = 0 ] && [ -n "$D" ] && pass connect || failstep connect $rc

if [ -n "$D" ]; then
    step fio
    fio --name=v --filename="$D" --rw=randwrite --bs=4k --size=8M --iodepth=8 --ioengine=libaio --direct=1 \
        --verify=crc32c --do_verify=1 --output-format=terse >/dev/null; rc=$?
    [ $rc = 0 ] && pass fio || failstep fio $rc

    step restart
    echo "@@RESTART-TARGET"
    sleep 4
    i=0; while [ $i -lt 60 ]; do C=$(ctrl); [ -n "$C" ] && [ "$(cat /sys/class/nvme/$C/state)" = live ] && break; sleep 1; i=$((i+1)); done
    dmesg | grep -i -E 'nvme|tls|handshake' | tail -n 10
    fio --name=v2 --filename="$D" --rw=randwrite --bs=4k --size=4M --iodepth=4 --ioengine=libaio --direct=1 \
        --verify=crc32c --do_verify=1 --output-format=terse >/dev/null; rc=$?
    [ $rc = 0 ] && pass restart || failstep restart $rc

    step disconnect
    nvme disconnect -n "$SUBNQN"; rc=$?
    [ $rc = 0 ] && pass disconnect || failstep disconnect $rc
fi
echo "@@DONE"
