// Client for the management API (used by `nvme-tcp target ctl`): one method per route, JSON in and out.
// It uses the WHATWG fetch that Node 20 ships (undici inside) rather than undici's npm `request`:
// msw's node interceptors patch globalThis.fetch and node:http but not the undici npm package, whose
// `request` dials its own sockets; with global fetch the same client code is testable with msw.
import type { AnaStateName, FaultConfig, HostConfig, NamespaceConfig, PortConfig, ReferralConfig, SubsystemConfig, TargetConfig } from '../model/config.js';

/** A request the API answered with a non-2xx status; `path` names the offending body field for 400s. */
export class MgmtApiError extends Error {
  readonly code = 'NVMEOF_ERR_MGMT_API';
  constructor(
    readonly status: number,
    message: string,
    readonly path?: string,
  ) {
    super(path !== undefined && path !== '' ? `HTTP ${status}: ${message} (at ${path})` : `HTTP ${status}: ${message}`);
    this.name = 'MgmtApiError';
  }
}

export interface MgmtClientOptions {
  /** Base URL of the API, e.g. "http://127.0.0.1:8080". */
  baseUrl: string;
  /** Bearer token, when the API was started with one. */
  token?: string;
  /** Per-request timeout (ms); default 10000. */
  timeoutMs?: number;
  /** Injected fetch (tests); default globalThis.fetch. */
  fetch?: typeof globalThis.fetch;
}

/**
 * V8's JSON.parse message quotes the start of the input ('Unexpected token 'D', "DHHC-1:01:…" is not valid
 * JSON'); a host-auth body may hold secrets, so replies keep only the token and position.
 */
export function jsonErrorWithoutInput(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  // V8 forms: `Unexpected token 'D', "DHHC-1:…" is not valid JSON`, `…, ..."xt": DHHC-1:"... is not valid JSON`.
  const i = msg.indexOf(', ');
  return / is not valid JSON$/.test(msg) && i > 0 ? `${msg.slice(0, i)} (invalid JSON)` : msg;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

const seg = (s: string | number): string => encodeURIComponent(String(s));

export class MgmtClient {
  readonly #base: string;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof globalThis.fetch;

  constructor(opts: MgmtClientOptions) {
    this.#base = opts.baseUrl.replace(/\/+$/, '');
    this.#token = opts.token;
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#fetch = opts.fetch ?? globalThis.fetch;
  }

  /** One request; resolves to the decoded JSON body (or text for non-JSON replies), rejects with MgmtApiError on non-2xx. */
  async call(method: HttpMethod, path: string, body?: unknown): Promise<unknown> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`;
    const init: RequestInit = { method, headers, signal: AbortSignal.timeout(this.#timeoutMs) };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const res = await this.#fetch(`${this.#base}${path}`, init);
    const text = await res.text();
    const isJson = (res.headers.get('content-type') ?? '').includes('application/json');
    let parsed: unknown = text;
    if (isJson && text !== '') {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new MgmtApiError(res.status, `unparsable JSON reply: ${text.slice(0, 200)}`);
      }
    }
    if (!res.ok) {
      if (typeof parsed === 'object' && parsed !== null && 'error' in parsed) {
        const { error, path: field } = parsed as { error: unknown; path?: unknown };
        throw new MgmtApiError(res.status, String(error), typeof field === 'string' ? field : undefined);
      }
      throw new MgmtApiError(res.status, text === '' ? res.statusText : text.slice(0, 500));
    }
    return res.status === 204 ? undefined : parsed;
  }

  health(): Promise<unknown> {
    return this.call('GET', '/healthz');
  }
  listSubsystems(): Promise<unknown> {
    return this.call('GET', '/subsystems');
  }
  getSubsystem(nqn: string): Promise<unknown> {
    return this.call('GET', `/subsystems/${seg(nqn)}`);
  }
  addSubsystem(s: SubsystemConfig): Promise<unknown> {
    return this.call('POST', '/subsystems', s);
  }
  removeSubsystem(nqn: string): Promise<unknown> {
    return this.call('DELETE', `/subsystems/${seg(nqn)}`);
  }
  listNamespaces(nqn: string): Promise<unknown> {
    return this.call('GET', `/subsystems/${seg(nqn)}/namespaces`);
  }
  addNamespace(nqn: string, ns: NamespaceConfig): Promise<unknown> {
    return this.call('POST', `/subsystems/${seg(nqn)}/namespaces`, ns);
  }
  /** Enable/disable or re-map: `patch`'s fields replace the namespace's (PUT /subsystems/<nqn>/namespaces/<nsid>). */
  updateNamespace(nqn: string, nsid: number, patch: Partial<NamespaceConfig>): Promise<unknown> {
    return this.call('PUT', `/subsystems/${seg(nqn)}/namespaces/${seg(nsid)}`, patch);
  }
  /** Runtime subsystem attributes: maxIoQueues (disconnects its controllers), cntlidMin/cntlidMax. */
  updateSubsystem(nqn: string, patch: Pick<SubsystemConfig, 'maxIoQueues' | 'cntlidMin' | 'cntlidMax'>): Promise<unknown> {
    return this.call('PUT', `/subsystems/${seg(nqn)}`, patch);
  }
  removeNamespace(nqn: string, nsid: number): Promise<unknown> {
    return this.call('DELETE', `/subsystems/${seg(nqn)}/namespaces/${seg(nsid)}`);
  }
  /** Namespace masking: hosts a namespace is attached to ({hosts: null} = every allowed host). */
  namespaceHosts(nqn: string, nsid: number): Promise<unknown> {
    return this.call('GET', `/subsystems/${seg(nqn)}/namespaces/${seg(nsid)}/hosts`);
  }
  attachNamespaceHost(nqn: string, nsid: number, hostnqn: string): Promise<unknown> {
    return this.call('POST', `/subsystems/${seg(nqn)}/namespaces/${seg(nsid)}/hosts`, { nqn: hostnqn });
  }
  detachNamespaceHost(nqn: string, nsid: number, hostnqn: string): Promise<unknown> {
    return this.call('DELETE', `/subsystems/${seg(nqn)}/namespaces/${seg(nsid)}/hosts/${seg(hostnqn)}`);
  }
  /** Reservation state of a namespace (type, holder, registrants, generation, PTPL). */
  namespaceReservation(nqn: string, nsid: number): Promise<unknown> {
    return this.call('GET', `/subsystems/${seg(nqn)}/namespaces/${seg(nsid)}/reservation`);
  }
  listHosts(nqn: string): Promise<unknown> {
    return this.call('GET', `/subsystems/${seg(nqn)}/hosts`);
  }
  addHost(nqn: string, hostnqn: string): Promise<unknown> {
    return this.call('POST', `/subsystems/${seg(nqn)}/hosts`, { nqn: hostnqn });
  }
  removeHost(nqn: string, hostnqn: string): Promise<unknown> {
    return this.call('DELETE', `/subsystems/${seg(nqn)}/hosts/${seg(hostnqn)}`);
  }
  /** Hosts with DH-HMAC-CHAP keys (secrets shown as "<redacted>"). */
  listHostAuth(): Promise<unknown> {
    return this.call('GET', '/hosts');
  }
  /** Sets a host's keys (and hash/group lists); the reply is the redacted view. */
  setHostAuth(h: HostConfig): Promise<unknown> {
    return this.call('PUT', `/hosts/${seg(h.nqn)}`, h);
  }
  clearHostAuth(hostnqn: string): Promise<unknown> {
    return this.call('DELETE', `/hosts/${seg(hostnqn)}`);
  }
  setFaults(nqn: string, f: FaultConfig): Promise<unknown> {
    return this.call('PUT', `/subsystems/${seg(nqn)}/faults`, f);
  }
  /** Arms a fault rule (docs/faults.md); the reply is the stored rule with its id and counts. */
  addFaultRule(rule: unknown): Promise<unknown> {
    return this.call('POST', '/faults', rule);
  }
  listFaultRules(): Promise<unknown> {
    return this.call('GET', '/faults');
  }
  removeFaultRule(id: string): Promise<unknown> {
    return this.call('DELETE', `/faults/${seg(id)}`);
  }
  clearFaultRules(): Promise<unknown> {
    return this.call('DELETE', '/faults');
  }
  listPorts(): Promise<unknown> {
    return this.call('GET', '/ports');
  }
  addPort(p: PortConfig): Promise<unknown> {
    return this.call('POST', '/ports', p);
  }
  removePort(id: number): Promise<unknown> {
    return this.call('DELETE', `/ports/${seg(id)}`);
  }
  setAnaState(portId: number, grpid: number, state: AnaStateName): Promise<unknown> {
    return this.call('PUT', `/ports/${seg(portId)}/ana/${seg(grpid)}`, { state });
  }
  listReferrals(portId: number): Promise<unknown> {
    return this.call('GET', `/ports/${seg(portId)}/referrals`);
  }
  addReferral(portId: number, r: ReferralConfig): Promise<unknown> {
    return this.call('POST', `/ports/${seg(portId)}/referrals`, r);
  }
  removeReferral(portId: number, addr: string, port: number): Promise<unknown> {
    return this.call('DELETE', `/ports/${seg(portId)}/referrals/${seg(addr)}/${seg(port)}`);
  }
  controllers(): Promise<unknown> {
    return this.call('GET', '/controllers');
  }
  workers(): Promise<unknown> {
    return this.call('GET', '/workers');
  }
  setPlacement(placement: string): Promise<unknown> {
    return this.call('PUT', '/workers/placement', { placement });
  }
  /** One port's placement for queues arriving on it from now on; null: the target-wide one. */
  setPortPlacement(portId: number, placement: string | null): Promise<unknown> {
    return this.call('PUT', `/ports/${portId}/placement`, { placement });
  }
  async config(): Promise<TargetConfig> {
    return (await this.call('GET', '/config')) as TargetConfig;
  }
  async metrics(): Promise<string> {
    return String(await this.call('GET', '/metrics'));
  }
  /** The gateway group as this gateway sees it (GET /group). */
  groupStatus(): Promise<unknown> {
    return this.call('GET', '/group');
  }
  groupFailover(grpid: number, to?: string): Promise<unknown> {
    return this.call('POST', `/group/ana-groups/${seg(grpid)}/failover`, to !== undefined ? { to } : {});
  }
  groupFailback(grpid: number): Promise<unknown> {
    return this.call('POST', `/group/ana-groups/${seg(grpid)}/failback`, {});
  }
  /** Drain (true) or undrain a member; default the gateway this client talks to. */
  gatewayDrain(draining: boolean, id?: string): Promise<unknown> {
    return this.call('POST', '/group/drain', id !== undefined ? { draining, id } : { draining });
  }
}
