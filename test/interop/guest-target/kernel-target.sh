#!/bin/sh
# Guest script for test/interop/kernel-target.test.ts: the kernel nvmet target on the guest's eth0 (hostfwd delivers
# there), file-backed so data survives, then wait until the host test releases us.
set -eu
lab-nvmet-setup --traddr "$LAB_GUEST_IP" --trsvcid 4420 --portid 1 --backing file
lab-wait-host 5999 "${WAIT_S:-600}"
echo "### nvmet after the host test:"
dmesg | grep -E 'nvmet' | tail -n 12
