// Host side of NVMe/TCP TLS 1.3 (TP 8011): the tls/tls_key options and the per-queue handshake over a TLSSocket, which
// the connection core runs NVMe/TCP over like any net.Socket.
import type { Buffer } from 'node:buffer';
import type net from 'node:net';
import tls from 'node:tls';
import {
  DEFAULT_HKDF_ENCODING,
  SHA384_UNSUPPORTED,
  TlsKeyError,
  deriveTlsPsk,
  parseTlsKey,
  type HkdfLabelEncoding,
  type TlsConfiguredKey,
  type TlsIdentityVersion,
} from '../protocol/tls/index.js';
import { InvalidArgumentError } from './errors.js';

/** The one suite Node 20 does TLS 1.3 external PSK with (protocol/tls SHA384_UNSUPPORTED). */
const TLS_PSK_CIPHERS = 'TLS_AES_128_GCM_SHA256';

/** Resolved TLS options: the configured key (prints redacted), the identity version, the HkdfLabel encoding. */
export interface TlsOptions {
  key: TlsConfiguredKey;
  identityVersion: TlsIdentityVersion;
  hkdf: HkdfLabelEncoding;
}

type Raw = Record<string, unknown>;

/**
 * tls, tls_key, tls_identity_version, tls_hkdf. The kernel host takes its PSK from the keyring; this host has none, so
 * `tls` needs `tls_key` (and `tls_key` alone turns TLS on). SHA-384 keys are refused with the reason.
 */
export function resolveTls(o: Raw): TlsOptions | undefined {
  const on = o['tls'];
  if (on !== undefined && typeof on !== 'boolean') throw new InvalidArgumentError('tls', 'must be a boolean');
  const text = o['tls_key'];
  if (text === undefined) {
    if (on === true) throw new InvalidArgumentError('tls', 'needs tls_key (the configured PSK "NVMeTLSkey-1:..:..:"; this host has no kernel keyring)');
    for (const k of ['tls_identity_version', 'tls_hkdf']) if (o[k] !== undefined) throw new InvalidArgumentError(k, 'needs tls_key');
    return undefined;
  }
  if (on === false) throw new InvalidArgumentError('tls_key', 'given with tls: false; drop one');
  if (typeof text !== 'string') throw new InvalidArgumentError('tls_key', 'must be a string "NVMeTLSkey-1:<hh>:<base64>:"');
  let key: TlsConfiguredKey;
  try {
    key = parseTlsKey(text);
  } catch (e) {
    if (e instanceof TlsKeyError) throw new InvalidArgumentError('tls_key', `${e.message}; use the form nvme gen-tls-key prints`);
    throw e;
  }
  if (key.hash === 2) throw new InvalidArgumentError('tls_key', SHA384_UNSUPPORTED);
  const v = o['tls_identity_version'] ?? 0;
  if (v !== 0 && v !== 1) throw new InvalidArgumentError('tls_identity_version', 'must be 0 or 1');
  const hkdf = o['tls_hkdf'] ?? DEFAULT_HKDF_ENCODING;
  if (hkdf !== 'rfc8446' && hkdf !== 'pre-2025') throw new InvalidArgumentError('tls_hkdf', 'must be "rfc8446" or "pre-2025"');
  return { key, identityVersion: v, hkdf };
}

/** What a queue hands to tls.connect: the identity the ClientHello carries and its TLS PSK (secret). */
export interface TlsQueueCredentials {
  identity: string;
  psk: Buffer;
}

/**
 * The retained PSK's identity and TLS PSK for this host/subsystem pair, as the kernel host picks them from the keyring:
 * a retained key ('R'; generated keys come only from secure channel concatenation), version 1 only when asked.
 */
export function tlsCredentials(t: TlsOptions, hostnqn: string, subnqn: string): TlsQueueCredentials {
  return deriveTlsPsk(t.key, hostnqn, subnqn, t.identityVersion, t.hkdf);
}

/** A TLS 1.3 PSK client socket to host:port (connect(): 'secureConnect' means the stream is ready). */
export function tlsConnect(to: { host: string; port: number; localAddress?: string }, cred: TlsQueueCredentials): net.Socket {
  return tls.connect({
    host: to.host,
    port: to.port,
    ...(to.localAddress !== undefined ? { localAddress: to.localAddress } : {}),
    minVersion: 'TLSv1.3',
    maxVersion: 'TLSv1.3',
    ciphers: TLS_PSK_CIPHERS,
    // No certificates: the PSK authenticates both ends (TP 8011); there is no server name to check.
    checkServerIdentity: () => undefined,
    pskCallback: () => ({ psk: cred.psk, identity: cred.identity }),
  });
}

/** Whether this machine's kernel host could do `nvme connect --tls` (check-host). Read-only probes; nothing is run. */
export interface KernelTlsReport {
  /** Path of the tlshd binary (ktls-utils), if found. */
  tlshd: string | undefined;
  /** A process named tlshd is running (the kernel hands handshakes to it over netlink). */
  tlshdRunning: boolean;
  /** The kernel's ".nvme" keyring is visible in /proc/keys (nvme-fabrics built with CONFIG_NVME_TCP_TLS and loaded). */
  nvmeKeyring: boolean | undefined;
  /** CONFIG_NVME_TCP_TLS from /boot/config-<release>, if readable. */
  kconfig: 'y' | 'm' | 'n' | undefined;
  notes: string[];
}

export async function kernelTlsReport(): Promise<KernelTlsReport> {
  const fs = await import('node:fs/promises');
  const os = await import('node:os');
  const exists = async (p: string): Promise<boolean> => fs.access(p).then(() => true, () => false);
  let tlshd: string | undefined;
  for (const p of ['/usr/sbin/tlshd', '/sbin/tlshd', '/usr/bin/tlshd', '/usr/local/sbin/tlshd']) {
    if (await exists(p)) {
      tlshd = p;
      break;
    }
  }
  let tlshdRunning = false;
  try {
    for (const pid of await fs.readdir('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      const comm = await fs.readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '');
      if (comm.trim() === 'tlshd') {
        tlshdRunning = true;
        break;
      }
    }
  } catch {
    // No /proc: not Linux; reported through notes below.
  }
  let nvmeKeyring: boolean | undefined;
  try {
    nvmeKeyring = /\skeyring\s+\.nvme:/.test(await fs.readFile('/proc/keys', 'utf8'));
  } catch {
    nvmeKeyring = undefined;
  }
  let kconfig: KernelTlsReport['kconfig'];
  try {
    const m = /^CONFIG_NVME_TCP_TLS=([ym])$/m.exec(await fs.readFile(`/boot/config-${os.release()}`, 'utf8'));
    kconfig = m ? (m[1] as 'y' | 'm') : 'n';
  } catch {
    kconfig = undefined;
  }
  const notes: string[] = [];
  if (tlshd === undefined) notes.push('no tlshd: install ktls-utils (Debian trixie and later) for nvme connect --tls');
  else if (!tlshdRunning) notes.push('tlshd is installed but not running: systemctl enable --now tlshd');
  if (kconfig === 'n') notes.push('kernel built without CONFIG_NVME_TCP_TLS');
  if (nvmeKeyring === false) notes.push('no .nvme keyring in /proc/keys (nvme-fabrics not loaded, or this user cannot see it)');
  notes.push('this initiator does its own TLS (--tls --tls-key) and needs none of these');
  return { tlshd, tlshdRunning, nvmeKeyring, kconfig, notes };
}
