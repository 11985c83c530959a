#!/usr/bin/env bash
# run.sh [options] SCRIPT — boot the lab guest built by build.sh (LAB_OUT), run SCRIPT in it as root (busybox sh, cwd
# /lab, after modules and eth0 are up), stream what it prints, and exit with its exit status. 124: the run timed out;
# 125: the guest never printed its END marker (the kernel console's tail goes to stderr). harness/lab-boot.sh boots
# again a guest that died before its script began.
#
#   --timeout S                 the whole run, boot included (default 600, LAB_TIMEOUT)
#   --hostfwd [ADDR:]HPORT:GPORT  host ADDR (loopback, default 127.0.0.1):HPORT -> guest 10.0.2.15:GPORT; repeatable;
#                               default 14420:4420 (LAB_HOSTFWD_PORT changes 14420); "none": no forward
#   --guestfwd GIP:GPORT:HPORT  guest connections to GIP:GPORT -> host 127.0.0.1:HPORT, one socat per connection;
#                               repeatable; default 10.0.2.100:4420:HOST_PORT; "none": no forward
#   --host-port N               HOST_PORT of the default guestfwd (default 4420, LAB_HOST_PORT)
#   --tap N                     a second NIC on a host tap device with N queues (virtio-net mq; LAB_TAP): run.sh
#                               creates the tap with 10.201.X.1/24 on the host side, the guest's eth1 gets
#                               10.201.X.2/24, and the tap goes when run.sh exits. Needs root and /dev/net/tun;
#                               without them the run goes on with user-mode networking only and says why.
#   --env K=V                   exported in the guest before SCRIPT (repeatable)
#   --file PATH                 copied to /lab/files/ in the guest (repeatable)
#   --mem MB (1024)  --smp N (2)  --accel auto|kvm|tcg (auto: what build.sh's probe wrote to LAB_OUT/accel)
#   --append ARGS               more kernel command line
#   --console                   the guest's kernel console on stderr too
#   --keep                      keep the run directory (console.log, guest.out, qemu.cmd; LAB_KEEP=1)
#   --probe-accel               boot a no-op script to learn whether KVM works; writes LAB_OUT/accel (build.sh runs it)
#
# The guest sees LAB_NET (tap or user), with a tap LAB_TAP_IP, LAB_TAP_HOST_IP and LAB_TAP_QUEUES (run.sh prints
# "run.sh: net=tap dev=NAME host=IP guest=IP queues=N" or "run.sh: net=user (why)" on stderr before booting),
# The guest sees LAB_GUEST_IP, LAB_GUESTFWD_IP and LAB_GUESTFWD_PORT (the first guestfwd), LAB_FILES, LAB_ACCEL, and
# the helpers of guest/bin/ on PATH (copied in on every run, so changing one needs no rebuild). LAB_KERNEL=vmlinuz
# boots the compressed kernel instead of the PVH vmlinux; LAB_INITRD=gz the .gz archive instead of the plain one.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_OUT=${LAB_OUT:-/var/tmp/nvme-lab}
timeout_s=${LAB_TIMEOUT:-600} mem=1024 smp=2 accel=${LAB_ACCEL:-auto} host_port=${LAB_HOST_PORT:-4420}
console=0 keep=${LAB_KEEP:-0} probe=0 append="" script=""
tap_queues=${LAB_TAP:-0} tap="" tap_host="" tap_guest=""
hostfwds=() guestfwds=() envs=() files=()
default_hostfwd=1 default_guestfwd=1
GUEST_IP=10.0.2.15

fail() { echo "run.sh: $*" >&2; exit 125; }
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout_s=$2; shift ;;
    --hostfwd) default_hostfwd=0; [ "$2" = none ] || hostfwds+=("$2"); shift ;;
    --guestfwd) default_guestfwd=0; [ "$2" = none ] || guestfwds+=("$2"); shift ;;
    --host-port) host_port=$2; shift ;;
    --tap) tap_queues=$2; shift ;;
    --env) envs+=("$2"); shift ;;
    --file) files+=("$2"); shift ;;
    --mem) mem=$2; shift ;;
    --smp) smp=$2; shift ;;
    --accel) accel=$2; shift ;;
    --append) append="$append $2"; shift ;;
    --console) console=1 ;;
    --keep) keep=1 ;;
    --probe-accel) probe=1 ;;
    -h | --help) sed -n '2,29p' "$0"; exit 0 ;;
    -*) fail "unknown option $1 (run.sh --help)" ;;
    *) script=$1 ;;
  esac
  shift
done
[ -f "$LAB_OUT/vmlinuz" ] && [ -f "$LAB_OUT/initramfs.cpio.gz" ] || fail "no lab in $LAB_OUT: build it with \"bash $HERE/build.sh\""

run=$(mktemp -d "${TMPDIR:-/tmp}/nvme-lab-run.XXXXXX")
qemu_pid="" tail_pid=""
finish() {
  [ -z "$qemu_pid" ] || kill "$qemu_pid" 2>/dev/null
  [ -z "$tail_pid" ] || kill "$tail_pid" 2>/dev/null
  [ -z "$tap" ] || { [ -z "$qemu_pid" ] || wait "$qemu_pid" 2>/dev/null; ip link del "$tap" 2>/dev/null; }
  if [ "$keep" = 1 ]; then echo "run.sh: run directory kept: $run" >&2; else rm -rf "$run"; fi
}
trap finish EXIT
trap 'exit 130' INT TERM

# KVM when /dev/kvm works and boots the guest in time, else TCG; a TCG boot that fails with the PVH vmlinux is tried
# once more with the compressed kernel, and the vmlinux is set aside for good.
if [ "$probe" = 1 ]; then
  printf 'echo probe-ok\n' >"$run/probe.sh"
  # grep -c reads to the end: run.sh's streaming must not die of SIGPIPE before the guest powered off.
  boots() { LAB_TAP=0 bash "$0" --accel "$1" --timeout "$2" --hostfwd none --guestfwd none "$run/probe.sh" 2>>"$run/probe.err" | grep -c probe-ok >/dev/null; }
  result=tcg
  if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
    if boots kvm "${LAB_KVM_PROBE_TIMEOUT:-20}"; then result=kvm; fi
    echo "kvm probe: $result" | tee "$LAB_OUT/accel.txt" >&2
  else
    echo "kvm probe: /dev/kvm not usable" | tee "$LAB_OUT/accel.txt" >&2
  fi
  if [ "$result" = tcg ]; then
    t0=$SECONDS
    if ! boots tcg 120; then
      [ -f "$LAB_OUT/vmlinux" ] || { tail -n 30 "$run/probe.err" >&2; fail "the guest does not boot under TCG"; }
      echo "run.sh: no boot with the PVH vmlinux; setting it aside and booting vmlinuz" >&2
      mv "$LAB_OUT/vmlinux" "$LAB_OUT/vmlinux.disabled"
      t0=$SECONDS
      boots tcg 120 || { tail -n 30 "$run/probe.err" >&2; fail "the guest does not boot under TCG"; }
    fi
    echo "tcg boot, run and power-off: $((SECONDS - t0)) s" | tee -a "$LAB_OUT/accel.txt" >&2
  fi
  echo "$result" >"$LAB_OUT/accel"
  exit 0
fi

[ -n "$script" ] || fail "no SCRIPT given (run.sh --help)"
[ -f "$script" ] || fail "no such script: $script"
[ "$accel" != auto ] || accel=$(cat "$LAB_OUT/accel" 2>/dev/null || echo tcg)
case "$accel" in
  kvm) accel_args=(-accel kvm -cpu host) ;;
  tcg) accel_args=(-accel tcg,thread=multi -cpu max) ;;
  *) fail "--accel is auto, kvm or tcg, not $accel" ;;
esac

# qemu's user network, restricted: the guest reaches the host only through the forwards below.
net="user,id=n0,net=10.0.2.0/24,host=10.0.2.2,dns=10.0.2.3,dhcpstart=$GUEST_IP,ipv6=off,restrict=on"
[ "$default_hostfwd" = 0 ] || hostfwds=("${LAB_HOSTFWD_PORT:-14420}:4420")
[ "$default_guestfwd" = 0 ] || guestfwds=("10.0.2.100:4420:$host_port")
for h in ${hostfwds[@]+"${hostfwds[@]}"}; do
  IFS=: read -r a b c <<<"$h"
  [ -n "$c" ] || { c=$b; b=$a; a=127.0.0.1; }
  case "$a" in 127.*) ;; *) fail "--hostfwd binds a loopback address, not $a" ;; esac
  net="$net,hostfwd=tcp:$a:$b-$GUEST_IP:$c"
done
first_gip="" first_gport="" n=0
for g in ${guestfwds[@]+"${guestfwds[@]}"}; do
  IFS=: read -r gip gport hport <<<"$g"
  [ -n "$hport" ] || fail "--guestfwd is GUESTIP:GUESTPORT:HOSTPORT, not $g"
  [ -n "$first_gip" ] || { first_gip=$gip; first_gport=$gport; }
  # slirp starts this command for each guest connection, the connection on its stdin/stdout; socat logs to a file so
  # nothing but the peer's bytes enters the stream. ",," is an escaped comma in qemu's option syntax.
  net="$net,guestfwd=tcp:$gip:$gport-cmd:socat -lf $run/guestfwd-$n.log -d - TCP:127.0.0.1:$hport,,nodelay"
  n=$((n + 1))
done

# The tap NIC: a free 10.201.X.0/24 (looked for under a lock, so two runs do not take the same), the tap created
# multi_queue when N > 1 (qemu opens one file per queue pair), the host side addressed and up.
net_line="net=user"
case "$tap_queues" in '' | *[!0-9]*) fail "--tap is a queue count, not $tap_queues" ;; esac
if [ "$tap_queues" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then net_line="net=user (no tap: run.sh is not root)"
  elif [ ! -c /dev/net/tun ]; then net_line="net=user (no tap: /dev/net/tun missing)"
  else
    exec 8>/run/nvme-lab-tap.lock && flock 8
    for x in $(seq 1 250); do ip -o -4 addr show | grep -q " 10\.201\.$x\." || break; done
    name=nvlab$$
    mq=""; [ "$tap_queues" -gt 1 ] && mq=multi_queue
    if out=$(ip tuntap add dev "$name" mode tap $mq 2>&1); then
      tap=$name tap_host=10.201.$x.1 tap_guest=10.201.$x.2
      ip addr add "$tap_host/24" dev "$tap" && ip link set "$tap" up || fail "cannot address tap $tap"
      net_line="net=tap dev=$tap host=$tap_host guest=$tap_guest queues=$tap_queues"
    else
      net_line="net=user (no tap: ip tuntap: $out)"
    fi
    exec 8>&-
  fi
fi
echo "run.sh: $net_line" >&2
nic_tap=()
if [ -n "$tap" ]; then
  nd="tap,id=n1,ifname=$tap,script=no,downscript=no,vhost=off"
  dev="virtio-net-pci,netdev=n1,mac=52:54:00:12:34:57"
  [ "$tap_queues" -gt 1 ] && { nd="$nd,queues=$tap_queues"; dev="$dev,mq=on,vectors=$((2 * tap_queues + 2))"; }
  nic_tap=(-netdev "$nd" -device "$dev")
fi

# The initrd is the built archive followed by one with the script, its env, files and the guest helpers: the kernel
# unpacks both into the same root.
o=$run/overlay
mkdir -p "$o/lab/files" "$o/usr/local/bin"
{
  # eth1 (the tap NIC) is the run's, not the image's: set up here, before the script (sh ignores its #! line).
  [ -z "$tap" ] || printf 'ip link set eth1 up && ip addr add %s/24 dev eth1 || echo "run.sh: no eth1 for the tap" >&2\n' "$tap_guest"
  cat "$script"
} >"$o/lab/script"
install -m 0755 "$HERE"/guest/bin/* "$o/usr/local/bin/"
for f in ${files[@]+"${files[@]}"}; do cp -r "$f" "$o/lab/files/" || fail "cannot copy $f"; done
{
  printf 'export LAB_GUEST_IP=%s LAB_GUESTFWD_IP=%s LAB_GUESTFWD_PORT=%s LAB_FILES=/lab/files LAB_ACCEL=%s\n' \
    "$GUEST_IP" "$first_gip" "$first_gport" "$accel"
  if [ -n "$tap" ]; then printf 'export LAB_NET=tap LAB_TAP_IP=%s LAB_TAP_HOST_IP=%s LAB_TAP_QUEUES=%s\n' "$tap_guest" "$tap_host" "$tap_queues"
  else printf 'export LAB_NET=user\n'; fi
  for e in ${envs[@]+"${envs[@]}"}; do printf 'export %q\n' "$e"; done
} >"$o/lab/env"
(cd "$o" && find . -mindepth 1 | cpio -o -H newc -R 0:0 --quiet | gzip -1) >"$run/overlay.cpio.gz"
# Under TCG the plain archive and the PVH vmlinux each save the guest seconds of decompressing.
base=$LAB_OUT/initramfs.cpio
{ [ "${LAB_INITRD:-}" = gz ] || [ ! -f "$base" ]; } && base=$LAB_OUT/initramfs.cpio.gz
cat "$base" "$run/overlay.cpio.gz" >"$run/initrd.img"
kernel=$LAB_OUT/vmlinux
{ [ "${LAB_KERNEL:-}" = vmlinuz ] || [ ! -f "$kernel" ]; } && kernel=$LAB_OUT/vmlinuz

cmdline="console=ttyS0,115200 panic=1 rdinit=/init lab.ip=$GUEST_IP/24 lab.gw=10.0.2.2 lab.out=/dev/ttyS1 mitigations=off tsc=reliable$append"
: >"$run/console.log"
: >"$run/guest.out"
qemu=(qemu-system-x86_64 -name nvme-lab -nodefaults -no-user-config -display none -no-reboot "${accel_args[@]}"
  -smp "$smp" -m "$mem" -kernel "$kernel" -initrd "$run/initrd.img" -append "$cmdline"
  -serial "file:$run/console.log" -serial "file:$run/guest.out"
  -netdev "$net" -device virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56 ${nic_tap[@]+"${nic_tap[@]}"})
printf '%q ' "${qemu[@]}" >"$run/qemu.cmd"

t0=$SECONDS
timeout -k 5 "$timeout_s" "${qemu[@]}" >"$run/qemu.stderr" 2>&1 </dev/null &
qemu_pid=$!
[ "$console" = 0 ] || { tail -s 0.2 -n +1 -f --pid="$qemu_pid" "$run/console.log" | sed -u 's/\r//g' >&2 & }
# tail ends once qemu has exited and the file is read to its end.
tail -s 0.1 -n +1 -f --pid="$qemu_pid" "$run/guest.out" | sed -u 's/\r//g' &
tail_pid=$!
wait "$qemu_pid"
qemu_rc=$?
qemu_pid=""
wait "$tail_pid" 2>/dev/null
tail_pid=""
wait 2>/dev/null

end=$(tr -d '\r' <"$run/guest.out" | grep -ao '===LAB-SCRIPT-END rc=[0-9]*' | tail -n 1)
if [ -n "$end" ]; then
  echo "run.sh: accel=$accel smp=$smp mem=${mem}M ${net_line%% *} wall=$((SECONDS - t0))s script rc=${end##*rc=}" >&2
  exit "${end##*rc=}"
fi
if [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
  echo "run.sh: timed out after ${timeout_s}s (accel=$accel); the console's last lines:" >&2
  rc=124
else
  echo "run.sh: the guest ended without an END marker (qemu rc $qemu_rc); qemu's stderr and the console's last lines:" >&2
  cat "$run/qemu.stderr" >&2
  rc=125
fi
tail -n 40 "$run/console.log" | tr -d '\r' >&2
exit "$rc"
