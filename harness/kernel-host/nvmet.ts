// Linux's in-kernel NVMe/TCP target (nvmet + nvmet-tcp) configured through configfs: one subsystem, one namespace
// backed by a file (buffered: page cache, the counterpart of our target's RAM backend), one TCP port. The scripts are
// pure text for a POSIX sh (busybox in the lab guest), so the kernel-interop scenario's guest script embeds them and
// the duplicate-connect reference arms run them through a HostRunner; `root` prefixes every path (tests: a fake tree).
import type { ArmCheck, KernelHost } from './host.js';

/** The NQN kernel-interop gives nvmet in the guest (our initiator connects to it from the host). */
export const NVMET_NQN = 'nqn.2024-01.io.nvme-lab:kernel-target';

export interface NvmetConfig {
  nqn: string;
  /** An address, or a shell variable reference ("$LAB_GUEST_IP") that the script expands. */
  traddr: string;
  trsvcid: number;
  /** configfs port id (ports/N). */
  portId: number;
  nsid?: number;
  /** The namespace's backing file (created sparse); on tmpfs in the lab guest. */
  file: string;
  sizeMb: number;
}

const paths = (c: NvmetConfig, root: string): { t: string; s: string; p: string; ns: string; f: string } => {
  const t = `${root}/sys/kernel/config/nvmet`;
  const s = `${t}/subsystems/${c.nqn}`;
  return { t, s, p: `${t}/ports/${c.portId}`, ns: `${s}/namespaces/${c.nsid ?? 1}`, f: `${root}${c.file}` };
};

/**
 * The configfs writes that export `file` as namespace nsid of `nqn` on tcp `traddr:trsvcid` to any host
 * (attr_allow_any_host). buffered_io=1: nvmet's file backend opens with O_DIRECT otherwise, which tmpfs refuses.
 * `mkdir -p` where configfs creates the directory itself (namespaces/, subsystems/), so a fake tree works too.
 */
export function nvmetSetupScript(c: NvmetConfig, root = ''): string {
  const { s, p, ns, f } = paths(c, root);
  return [
    'set -e',
    `mkdir -p "$(dirname "${f}")"`,
    `dd if=/dev/zero of="${f}" bs=1M count=0 seek=${c.sizeMb} 2>/dev/null`,
    `mkdir "${s}"`,
    `echo 1 > "${s}/attr_allow_any_host"`,
    `mkdir -p "${ns}"`,
    `printf '%s' "${f}" > "${ns}/device_path"`,
    `echo 1 > "${ns}/buffered_io"`,
    `echo 1 > "${ns}/enable"`,
    `mkdir "${p}"`,
    `echo tcp > "${p}/addr_trtype"`,
    `echo ipv4 > "${p}/addr_adrfam"`,
    `echo "${c.traddr}" > "${p}/addr_traddr"`,
    `echo ${c.trsvcid} > "${p}/addr_trsvcid"`,
    `mkdir -p "${p}/subsystems"`,
    `ln -s "${s}" "${p}/subsystems/${c.nqn}"`,
    `echo "nvmet: ${c.nqn} nsid ${c.nsid ?? 1} -> ${f}, port ${c.portId} tcp ${c.traddr}:${c.trsvcid}"`,
  ].join('\n');
}

/**
 * Undoes nvmetSetupScript in reverse order (configfs: the port's link, the port, the namespace disabled then removed,
 * the subsystem), every step tried; exit status 1 when one failed. Hosts must have disconnected first.
 */
export function nvmetTeardownScript(c: NvmetConfig, root = ''): string {
  const { s, p, ns, f } = paths(c, root);
  return [
    'rc=0',
    `rm -f "${p}/subsystems/${c.nqn}" || rc=1`,
    `[ ! -d "${p}" ] || rmdir "${p}" || rc=1`,
    `[ ! -e "${ns}/enable" ] || echo 0 > "${ns}/enable" || rc=1`,
    `[ ! -d "${ns}" ] || rmdir "${ns}" || rc=1`,
    `[ ! -d "${s}" ] || rmdir "${s}" || rc=1`,
    `rm -f "${f}"`,
    'exit $rc',
  ].join('\n');
}

/**
 * Whether nvmet can serve here: configfs mounted with the nvmet tree and nvmet-tcp loaded. Nothing is loaded for the
 * user: the reason says what to run (the lab guest loads both at boot).
 */
export async function nvmetAvailable(host: KernelHost): Promise<ArmCheck> {
  const t = `${host.root}/sys/kernel/config/nvmet`;
  const r = await host.runner.exec(['sh', '-c', `[ -d ${t}/subsystems ] || { echo "no ${t.slice(host.root.length)}"; exit 1; }; [ -d ${host.root}/sys/module/nvmet_tcp ] || { echo "nvmet-tcp not loaded"; exit 1; }`]);
  if (r.code === 0) return undefined;
  return `nvmet is not available on this host (${r.stdout.trim() || r.stderr.trim()}): load it with "modprobe nvmet-tcp" (with configfs on /sys/kernel/config) to add the nvmet reference arms`;
}

/** The lowest configfs port id not in use (a machine may export its own nvmet ports). */
export async function nvmetFreePortId(host: KernelHost): Promise<number> {
  const r = await host.runner.exec(['ls', `${host.root}/sys/kernel/config/nvmet/ports`]);
  const used = new Set(r.stdout.split(/\s+/).filter((x) => x !== '').map(Number));
  let id = 1;
  while (used.has(id)) id++;
  return id;
}

/** A running nvmet export made by startNvmet; stop() tears it down (after every host disconnected). */
export interface NvmetExport {
  config: NvmetConfig;
  stop(): Promise<void>;
}

/** Runs nvmetSetupScript on the host; on failure tears down what was made and throws with the script's message. */
export async function startNvmet(host: KernelHost, c: NvmetConfig): Promise<NvmetExport> {
  const sh = (script: string) => host.runner.exec(['sh', '-c', script]);
  const r = await sh(nvmetSetupScript(c, host.root));
  const stop = async (): Promise<void> => {
    const d = await sh(nvmetTeardownScript(c, host.root));
    if (d.code !== 0) throw new Error(`nvmet teardown failed: ${(d.stderr || d.stdout).trim().split('\n').slice(-2).join(' / ')}`);
  };
  if (r.code !== 0) {
    await stop().catch(() => undefined);
    throw new Error(`nvmet setup failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().split('\n').slice(-2).join(' / ')}`);
  }
  return { config: c, stop };
}
