#!/bin/sh
# Guest script of test/interop/auth-kernel.test.ts, part 2: Linux nvmet (CONFIG_NVME_TARGET_AUTH) requiring
# DH-HMAC-CHAP from one host, with keys made here by nvme-cli's gen-dhchap-key, printed for the host test
# (@@KEYS ...), then wait until the host test (our initiator, via hostfwd) releases us.
#   env: SUBNQN, WAIT_S
set -eu
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-7000000002aa
lab-nvmet-setup --nqn "$SUBNQN" --traddr "$LAB_GUEST_IP" --trsvcid 4420 --portid 1 --backing file --size-gb 1
T=/sys/kernel/config/nvmet
S=$T/subsystems/$SUBNQN
KEY=$(nvme gen-dhchap-key --hmac=2 --nqn="$HOSTNQN")
CKEY=$(nvme gen-dhchap-key --hmac=3 --nqn="$SUBNQN")
nvme check-dhchap-key --key="$KEY" > /dev/null
mkdir "$T/hosts/$HOSTNQN"
printf '%s' "$KEY" > "$T/hosts/$HOSTNQN/dhchap_key"
printf '%s' "$CKEY" > "$T/hosts/$HOSTNQN/dhchap_ctrl_key"
echo 'hmac(sha384)' > "$T/hosts/$HOSTNQN/dhchap_hash"
echo ffdhe2048 > "$T/hosts/$HOSTNQN/dhchap_dhgroup"
echo 0 > "$S/attr_allow_any_host"
ln -s "$T/hosts/$HOSTNQN" "$S/allowed_hosts/$HOSTNQN"
echo "nvmet host $HOSTNQN: hash $(cat "$T/hosts/$HOSTNQN/dhchap_hash") dhgroup $(cat "$T/hosts/$HOSTNQN/dhchap_dhgroup")"
echo "@@KEYS host=$KEY ctrl=$CKEY hostnqn=$HOSTNQN"
lab-wait-host 5999 "${WAIT_S:-400}"
echo "### nvmet after the host test:"
dmesg | grep -E 'nvmet' | tail -n 30
