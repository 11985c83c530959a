#!/bin/sh
# Guest script of test/interop/tls-concat-kernel.test.ts, part 2: the kernel nvmet target (7.x) offering secure channel
# concatenation: a TLS port (addr_tsas tls1.3) with addr_treq "not required" (the first admin queue is cleartext), the
# host's DH-HMAC-CHAP key (hosts/<nqn>/dhchap_key, hmac(sha256), ffdhe2048) and tlshd doing the server handshake with
# the PSK nvmet generates into the .nvme keyring; then wait until the host test releases us.
# Environment: SUBNQN, HOSTNQN (our initiator's), SECRET.
echo "$LAB_GUEST_IP nvmet" >> /etc/hosts
printf 'options timeout:1 attempts:1\n' > /etc/resolv.conf
(tlshd -s > /tmp/tlshd.log 2>&1 &); sleep 1
T=/sys/kernel/config/nvmet
H=$T/hosts/$HOSTNQN
mkdir "$H"
printf '%s' "$SECRET" > "$H/dhchap_key"; echo 'hmac(sha256)' > "$H/dhchap_hash"; echo ffdhe2048 > "$H/dhchap_dhgroup"
S=$T/subsystems/$SUBNQN
dd if=/dev/zero of=/tmp/ns1.img bs=1M count=0 seek=64 2>/dev/null
mkdir "$S"; echo 0 > "$S/attr_allow_any_host"; ln -s "$H" "$S/allowed_hosts/$HOSTNQN"
mkdir "$S/namespaces/1"; printf '%s' /tmp/ns1.img > "$S/namespaces/1/device_path"
echo 1 > "$S/namespaces/1/buffered_io"; echo 1 > "$S/namespaces/1/enable"
P=$T/ports/1
mkdir "$P"
echo tcp > "$P/addr_trtype"; echo ipv4 > "$P/addr_adrfam"; echo "$LAB_GUEST_IP" > "$P/addr_traddr"; echo 4420 > "$P/addr_trsvcid"
echo tls1.3 > "$P/addr_tsas"; echo "not required" > "$P/addr_treq"
echo "nvmet port: tsas $(cat "$P/addr_tsas") treq $(cat "$P/addr_treq"); host attrs: $(ls "$H" | tr '\n' ' ')"
ln -s "$S" "$P/subsystems/$SUBNQN"
lab-wait-host 5999 "${WAIT_S:-300}"
echo "### after the host test:"
dmesg | grep -i -E 'nvmet|tls|handshake|concat|auth' | tail -n 20
grep -a 'NVMe1G' /proc/keys | sed 's/^/key: /'
tail -n 12 /tmp/tlshd.log
