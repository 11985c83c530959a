// What a route table entry is: { method, path, handler }, the context a handler gets, the replies it returns, and
// the lookups several tables share (a subsystem, a port, a numeric path parameter) with the 404s they throw.
import { z } from 'zod';
import { nvmetNameSchema } from '../../config/schema.js';
import type { NamespaceConfig, PortConfig, SubsystemConfig } from '../../model/config.js';
import type { TargetService } from '../../service/index.js';
import { HttpError } from '../http.js';
import type { TargetMetrics } from '../metrics.js';

/** The TargetService surface the API uses (tests may pass a stand-in). */
export type MgmtService = Pick<
  TargetService,
  | 'addPort'
  | 'removePort'
  | 'boundPorts'
  | 'addSubsystem'
  | 'removeSubsystem'
  | 'addNamespace'
  | 'removeNamespace'
  | 'updateNamespace'
  | 'updateSubsystem'
  | 'addAllowedHost'
  | 'removeAllowedHost'
  | 'setAnaState'
  | 'addReferral'
  | 'removeReferral'
  | 'setFaults'
  | 'addFaultRule'
  | 'removeFaultRule'
  | 'clearFaultRules'
  | 'listFaultRules'
  | 'setHostAuth'
  | 'clearHostAuth'
  | 'listHostAuth'
  | 'getConfig'
  | 'listControllers'
  | 'stats'
  | 'attachNamespaceHost'
  | 'detachNamespaceHost'
  | 'namespaceHosts'
  | 'reservationStatus'
>;

/** Worker pool views (target/workers); optional so a service without workers still fits. */
export type WorkerService = Partial<Pick<TargetService, 'workers' | 'setPlacement' | 'setPortPlacement' | 'portPlacements'>> & { readonly placement?: string };

/** Gateway-group views and moves (target/gateway); optional so a target outside a group still fits (409 with the fix). */
export type GroupService = Partial<Pick<TargetService, 'groupView' | 'groupFailover' | 'groupFailback' | 'setGatewayDraining'>>;

/** Zones of zoned namespaces (docs/target.md, zoned namespaces); optional so a stand-in without them still fits. */
export type ZoneService = Partial<Pick<TargetService, 'zones' | 'setZoneCondition'>>;
export type RouteService = MgmtService & WorkerService & GroupService & ZoneService;

export type Params = Record<string, string>;

export interface RouteContext {
  service: RouteService;
  metrics: TargetMetrics;
  /** Path parameters by name (`:nqn` → params.nqn), already URL-decoded. */
  params: Params;
  /** Reads and parses the JSON body (400 when missing or not JSON, 413 when too large). */
  body: () => Promise<unknown>;
}

export interface Reply {
  status: number;
  json?: unknown;
  text?: string;
  contentType?: string;
  /** The target's configuration changed (write-back applies). */
  mutated?: boolean;
}

export type RouteMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface RouteEntry {
  method: RouteMethod;
  /** "/subsystems/:nqn/namespaces/:nsid": literal segments, and `:name` for a parameter. */
  path: string;
  handler: (ctx: RouteContext) => Promise<Reply> | Reply;
  /** Served without the bearer token (GET /healthz, for probes). */
  public?: true;
}

export const ok = (json: unknown, mutated = false): Reply => ({ status: 200, json, mutated });
export const created = (json: unknown): Reply => ({ status: 201, json, mutated: true });
export const noContent: Reply = { status: 204, mutated: true };

/** A decimal path parameter; anything else names no resource (404). */
export function intParam(v: string | undefined, name: string): number {
  if (v === undefined || !/^\d+$/.test(v)) throw new HttpError(404, `${name} ${JSON.stringify(v ?? '')} is not a number`);
  return Number(v);
}

export function subsystemOf(service: RouteService, nqn: string | undefined): SubsystemConfig {
  const s = service.getConfig().subsystems.find((x) => x.nqn === nqn);
  if (s === undefined) throw new HttpError(404, `no subsystem ${nqn ?? ''}`);
  return s;
}

/** The port named by the `:id` path parameter. */
export function portOf(service: RouteService, id: string | undefined): PortConfig {
  const n = intParam(id, 'port id');
  const p = service.getConfig().ports.find((x) => x.id === n);
  if (p === undefined) throw new HttpError(404, `no port ${n}`);
  return p;
}

/** The `:nsid` path parameter. */
export const nsidParam = (params: Params): number => intParam(params.nsid, 'nsid');

/** Namespace `nsid` of subsystem `s`. */
export function namespaceOf(s: SubsystemConfig, nsid: number): NamespaceConfig {
  const ns = (s.namespaces ?? []).find((n) => n.nsid === nsid);
  if (ns === undefined) throw new HttpError(404, `no namespace ${nsid} in ${s.nqn}`);
  return ns;
}

/** `{nqn}`: a host to allow on a subsystem, or to attach a namespace to. */
export const hostBodySchema = z.strictObject({ nqn: nvmetNameSchema });
