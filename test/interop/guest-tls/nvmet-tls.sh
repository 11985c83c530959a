#!/bin/sh
# Guest script of test/interop/tls-kernel.test.ts, part 2: the kernel nvmet target with a TLS-required port (TP 8011;
# addr_tsas tls1.3, addr_treq required) on eth0, the host's PSK in the .nvme keyring (nvme check-tls-key --insert) and
# tlshd doing the server handshake; then wait until the host test releases us.
# Environment: SUBNQN, HOSTNQN (our initiator's), KEY.
echo "$LAB_GUEST_IP nvmet" >> /etc/hosts
printf 'options timeout:1 attempts:1\n' > /etc/resolv.conf
nvme check-tls-key --keydata="$KEY" --subsysnqn="$SUBNQN" --hostnqn="$HOSTNQN" --identity=0 --insert
(tlshd -s > /tmp/tlshd.log 2>&1 &); sleep 1
T=/sys/kernel/config/nvmet
S=$T/subsystems/$SUBNQN
dd if=/dev/zero of=/tmp/ns1.img bs=1M count=0 seek=64 2>/dev/null
mkdir "$S"; echo 1 > "$S/attr_allow_any_host"
mkdir "$S/namespaces/1"; printf '%s' /tmp/ns1.img > "$S/namespaces/1/device_path"
echo 1 > "$S/namespaces/1/buffered_io"; echo 1 > "$S/namespaces/1/enable"
P=$T/ports/1
mkdir "$P"
echo tcp > "$P/addr_trtype"; echo ipv4 > "$P/addr_adrfam"; echo "$LAB_GUEST_IP" > "$P/addr_traddr"; echo 4420 > "$P/addr_trsvcid"
echo tls1.3 > "$P/addr_tsas" && echo required > "$P/addr_treq"
echo "nvmet port: tsas $(cat "$P/addr_tsas") treq $(cat "$P/addr_treq")"
ln -s "$S" "$P/subsystems/$SUBNQN"
lab-wait-host 5999 "${WAIT_S:-300}"
echo "### after the host test:"
dmesg | grep -i -E 'nvmet|tls|handshake' | tail -n 12
tail -n 12 /tmp/tlshd.log
