// The target's configuration model: one shape for the JSON config file, the HTTP API bodies and TargetService.
// The schema in target/config/schema.ts validates unknown input into these types; TargetService.apply() replays them.
import type { AnaStateName } from '../../protocol/index.js';
import type { SizeSpec } from '../../protocol/values/index.js';
import type { Placement } from './placement.js';

export type { SizeSpec };

/** ANA state names as nvmet's configfs spells them; protocol/ owns the list (NVMe Base 2.0 §8.1.3). */
export type { AnaStateName };

export interface ReferralConfig {
  /** Address of the other discovery service. */
  addr: string;
  port: number;
  family?: 'ipv4' | 'ipv6';
  /** Port id reported in the referral entry. */
  portId?: number;
}

export interface PortConfig {
  /** NVMe port id (PORTID in discovery entries); unique. */
  id: number;
  /** Listen address ("127.0.0.1", "::1", "0.0.0.0"). */
  addr: string;
  /** TCP port; 0 picks a free one (tests). 4420 by convention, 8009 for discovery. */
  port: number;
  family?: 'ipv4' | 'ipv6';
  /** Address advertised in discovery log entries when different from addr (e.g. NAT/qemu guestfwd). */
  advertiseAddr?: string;
  advertisePort?: number;
  /** In-capsule data accepted on I/O queues (bytes); IOCCSZ = (64 + this)/16. Default 16384. */
  inlineDataSize?: number;
  /** MAXH2CDATA advertised in ICResp (bytes, multiple of 4, >= 4096). Default 131072. */
  maxH2CData?: number;
  /** Largest C2HData PDU payload; reads are split at this size. Default 131072. */
  c2hDataSize?: number;
  /** Per-ANA-group state on this port, keyed by group id; groups not listed are optimized. */
  anaStates?: Record<string, AnaStateName>;
  referrals?: ReferralConfig[];
  /** Advertise SQ flow control disable (TREQ bit 2). Default true, like nvmet. */
  sqFlowDisable?: boolean;
  /** Most TCP connections (queues, any state) this port holds at once; further ones are closed at accept. Default 4096. */
  maxConnections?: number;
  /**
   * Per queue: most bytes of command data in flight (R2T data awaited + read data executing or queued for sending).
   * Beyond it new commands wait and, while the excess is unsent read data, the socket is not read (backpressure).
   * Default 8 MiB.
   */
  maxInFlightBytes?: number;
  /**
   * TLS 1.3 with PSKs (TP 8011): 'none' (default) cleartext only, 'allowed' TLS or a cleartext ICReq (the first byte
   * decides), 'required' TLS only. Hosts' keys are hosts[].tlsKey.
   */
  tls?: 'none' | 'allowed' | 'required';
  /** Seconds a TLS port gives a connection to finish its handshake (default 10). */
  tlsHandshakeTimeoutS?: number;
  /**
   * Which worker gets a new I/O queue that arrives on this port (workers > 1), overriding the target-wide
   * `placement`; changeable at runtime (PUT /ports/:id/placement). Omitted: the target-wide policy.
   */
  placement?: Placement;
  /**
   * Secure channel concatenation (TP 8018; Linux `nvme connect --concat`, docs/tls.md): a host with a DH-HMAC-CHAP
   * key authenticates its cleartext admin queue with SC_C NEWTLSPSK, and the PSK that generates is what its queues then
   * use inside TLS. Needs tls 'allowed' or 'required' (on 'required' the cleartext admin queue is admitted for this
   * alone). Default false.
   */
  tlsConcat?: boolean;
}

export type BackendConfig =
  | {
      type: 'ram';
      size: SizeSpec;
      /**
       * With workers > 1: each worker keeps its own copy of the blocks it reads (up to `size` more memory per worker), so
       * a read is a copy instead of a pread of the shared tmpfs file (docs/target.md, "Target workers"). Default true;
       * false keeps one copy in all, at ~2.7× the CPU per read.
       */
      workerCache?: boolean;
    }
  | { type: 'file'; path: string; /** create or extend to this size; omit to use the file's size */ size?: SizeSpec }
  | { type: 'null'; size: SizeSpec };

export interface NamespaceConfig {
  nsid: number;
  backend: BackendConfig;
  /** LBA size: 512 (default, what ESXi requires) or 4096. */
  blockSize?: 512 | 4096;
  /** 36-char UUID; generated stably from subsystem NQN + nsid when omitted. */
  uuid?: string;
  /** 32 hex chars; generated stably when omitted. */
  nguid?: string;
  /** ANA group id (default 1). */
  anaGroup?: number;
  readOnly?: boolean;
  /**
   * false: the namespace exists but is not attached (nvmet namespaces/<nsid>/enable = 0): it is missing from every
   * controller's active list and I/O to it fails with Invalid Namespace. Default true.
   */
  enabled?: boolean;
  /**
   * Namespace masking: host NQNs this namespace is attached to. Other hosts see it as absent (not in the active
   * list, Identify Namespace zeros, Invalid Namespace for I/O). Omitted: visible to every allowed host.
   */
  hosts?: string[];
  /** Zoned namespace (ZNS 1.1); absent: conventional. docs/target.md, zoned namespaces. */
  zoned?: ZonedConfig;
}

/** A zoned namespace's geometry and resources (ZNS 1.1 §2.1); sizes in bytes like backend sizes. */
export interface ZonedConfig {
  /** Zone size, a power of two of at least one block (default 16M); the namespace size must be a multiple. */
  zoneSize?: SizeSpec;
  /** Writable blocks per zone, at most the zone size (default: the zone size). */
  zoneCapacity?: SizeSpec;
  /** Most zones open at once (MOR + 1); 0 or absent: no limit. */
  maxOpen?: number;
  /** Most zones active (open or closed) at once (MAR + 1); 0 or absent: no limit. */
  maxActive?: number;
}

export interface FaultConfig {
  /** Added latency before each I/O command completes (microseconds). */
  commandLatencyUs?: number;
  /** Added latency before each Fabrics Connect completes (milliseconds). */
  connectLatencyMs?: number;
  /** Fail the next `count` I/O commands with `status` (Linux-style status value, e.g. 0x4002). */
  failNext?: { count: number; status: number };
}

export interface SubsystemConfig {
  nqn: string;
  /** Allow every host (default true when `hosts` is empty). */
  allowAnyHost?: boolean;
  /** Allowed host NQNs. */
  hosts?: string[];
  /** Port ids this subsystem is exported on; default all ports. */
  ports?: number[];
  serial?: string;
  model?: string;
  firmware?: string;
  /**
   * Cap on I/O queues granted per controller by Set Features Number of Queues (default 128; nvmet attr_qid_max).
   * Changing it at runtime disconnects the subsystem's controllers so hosts reconnect with the new limit, as nvmet does.
   */
  maxIoQueues?: number;
  /** Max queue entries per I/O queue (MQES + 1); default 1024. */
  maxQueueSize?: number;
  /** Most live controllers (discovery ones excluded) at once; further admin Connects get CONNECT_CTRL_BUSY with DNR. Default 0xFFEF (the cntlid range). */
  maxControllers?: number;
  /** Lowest controller ID handed out by dynamic allocation (nvmet attr_cntlid_min); default 1. */
  cntlidMin?: number;
  /** Highest controller ID handed out (nvmet attr_cntlid_max); default 0xFFEF. An exhausted range refuses Connect with Controller Busy. */
  cntlidMax?: number;
  /** MDTS as log2 of 4 KiB units (default 8 = 1 MiB). */
  mdts?: number;
  /** Report ANA (CMIC bit 3, ANA log). Default true. */
  ana?: boolean;
  namespaces?: NamespaceConfig[];
  faults?: FaultConfig;
}

export interface HostConfig {
  nqn: string;
  /** DH-HMAC-CHAP host key ("DHHC-1:xx:...:"), when authentication is required. */
  dhchapKey?: string;
  /** DH-HMAC-CHAP controller key: lets the host authenticate the controller too (bidirectional). */
  dhchapCtrlKey?: string;
  /** Acceptable hashes in preference order, nvmet spelling: "hmac(sha256)", "hmac(sha384)", "hmac(sha512)". Default all. */
  dhchapHash?: string[];
  /** Acceptable DH groups in preference order: "null", "ffdhe2048" … "ffdhe8192". Default all. */
  dhchapDhgroup?: string[];
  /** Configured TLS PSK in the interchange format "NVMeTLSkey-1:xx:...:" (`nvme gen-tls-key`); secret, redacted. */
  tlsKey?: string;
  /**
   * HkdfLabel encoding the host's libnvme derived its TLS PSK with: 'rfc8446' (default; the kernel and libnvme since
   * 2025) or 'pre-2025' (older libnvme, e.g. nvme-cli 2.13 on Debian trixie). docs/tls.md.
   */
  tlsHkdf?: 'rfc8446' | 'pre-2025';
}

/**
 * Membership of a gateway group (docs/gateway-groups.md): N targets serving the same subsystems, coordinated through
 * etcd, each ANA group optimized on exactly one gateway and failed over / back by the group itself.
 */
export interface GatewayConfig {
  /** The group's name: gateways with the same name and etcd form one group. */
  group: string;
  /** etcd client URLs, e.g. ["http://10.0.0.5:2379"]. */
  etcd: string[];
  /** This gateway's id, unique in the group (default: the host name). */
  id?: string;
  /** etcd lease TTL in ms, whole seconds (etcd leases count seconds); default 3000. */
  leaseTtlMs?: number;
  /** How long a returning preferred gateway waits before its groups move back; default 5000. */
  failbackDelayMs?: number;
  /** ANA state of groups this gateway does not own: 'inaccessible' (default) or 'non-optimized'. */
  notOwned?: 'inaccessible' | 'non-optimized';
  /** ANA groups this gateway is the preferred owner of (default: the lowest group nobody prefers yet). */
  preferred?: number[];
  /** Controller IDs per gateway; gateway slot k gets 1 + k*size .. (k+1)*size (default 1000). */
  cntlidRangeSize?: number;
}

export interface TargetConfig {
  ports: PortConfig[];
  subsystems: SubsystemConfig[];
  hosts?: HostConfig[];
  /** Unique discovery NQN; the well-known one is always served too. */
  discoveryNqn?: string;
  /** Seconds a new socket may stay silent before ICReq (default 10). */
  icReqTimeoutS?: number;
  /** HTTP management API listen address "ADDR:PORT" (issue 5). */
  api?: { listen: string; token?: string };
  /** Worker processes serving I/O queues (default 1: one process); "auto": one per CPU (docs/target.md, "Target workers"). */
  workers?: number | 'auto';
  /** Which worker a new I/O queue goes to (PLACEMENTS; default queue). */
  placement?: Placement;
  /** Serve as one gateway of a gateway group (docs/gateway-groups.md). */
  gateway?: GatewayConfig;
}
