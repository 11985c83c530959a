// The catalogue's target: our target in this process, two ports onto one subsystem (two paths for the multipath
// cases), its `fault fired` log lines kept so each cell's evidence has the rule firings.
import { Writable } from 'node:stream';
import pino from 'pino';
import { generateDhchapKey } from '../../protocol/auth/index.js';
import { TargetService, type FaultRuleInput } from '../../target/index.js';
import { armFault } from '../faults.js';
import { CATALOGUE_NQN, CATALOGUE_PORTS } from './cases.js';
import type { RuleFirings } from './types.js';

/** Log lines a case keeps (head and tail, at most twice this); GET /faults hit counts stay exact. */
const LOG_KEEP = 400;

export class CatalogueTarget {
  readonly service: TargetService;
  readonly #lines: string[] = [];
  readonly #authHosts = new Set<string>();

  private constructor(service: TargetService, lines: string[]) {
    this.service = service;
    this.#lines = lines;
  }

  /** Listens on 127.0.0.1, port 0, for each catalogue port; a 4 MiB RAM namespace 1. */
  static async start(): Promise<CatalogueTarget> {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb): void {
        for (const l of chunk.toString().split('\n')) if (l !== '' && (l.includes('fault fired') || /"level":(40|50|60)/.test(l))) lines.push(l);
        // A host that retries in a loop fires a rule tens of thousands of times: keep the log's head and tail.
        if (lines.length > 2 * LOG_KEEP) lines.splice(LOG_KEEP, lines.length - 2 * LOG_KEEP + LOG_KEEP / 2);
        cb();
      },
    });
    const service = new TargetService({ logger: pino({ level: 'info' }, sink) });
    await service.apply({
      ports: CATALOGUE_PORTS.map((id) => ({ id, addr: '127.0.0.1', port: 0 })),
      subsystems: [{ nqn: CATALOGUE_NQN, allowAnyHost: true, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] }],
    });
    return new CatalogueTarget(service, lines);
  }

  /** The TCP port each catalogue port id listens on. */
  portOf(id: number): number {
    const p = this.service.boundPorts().find((b) => b.id === id);
    if (p === undefined) throw new Error(`catalogue target has no port ${id}`);
    return p.port;
  }

  /** Clears the rules, ANA states, host keys and firing log of the last case. */
  reset(): void {
    this.service.clearFaultRules();
    for (const id of CATALOGUE_PORTS) this.service.setAnaState(id, 1, 'optimized');
    for (const h of this.#authHosts) this.service.clearHostAuth(h);
    this.#authHosts.clear();
    this.#lines.length = 0;
  }

  /**
   * Makes `hostnqn` authenticate with DH-HMAC-CHAP (NVMe Base 2.0 §8.13.5) until the next reset, bidirectionally with
   * `ctrl`; the secrets.
   */
  requireAuth(hostnqn: string, o: { ctrl?: boolean } = {}): { key: string; ctrlKey?: string } {
    const key = generateDhchapKey({ hmac: 1, hostnqn }).format();
    const ctrlKey = o.ctrl === true ? generateDhchapKey({ hmac: 1, hostnqn: CATALOGUE_NQN }).format() : undefined;
    this.service.setHostAuth({ nqn: hostnqn, dhchapKey: key, ...(ctrlKey === undefined ? {} : { dhchapCtrlKey: ctrlKey }) });
    this.#authHosts.add(hostnqn);
    return { key, ...(ctrlKey === undefined ? {} : { ctrlKey }) };
  }

  arm(rules: readonly FaultRuleInput[]): void {
    for (const r of rules) armFault(this.service, r);
  }

  firings(): RuleFirings {
    return { rules: this.service.listFaultRules().map((r) => ({ id: r.id, matches: r.matches, hits: r.hits })), lines: [...this.#lines] };
  }

  /**
   * Waits up to `ms` for the target to hold no controller and no bound queue (a host that failed its connect must
   * leave nothing behind); the counts last seen.
   */
  async settled(ms = 5000): Promise<{ controllers: number; queues: number }> {
    const t0 = Date.now();
    for (;;) {
      const d = this.service.debugCounts();
      if ((d.controllers === 0 && d.queues === 0) || Date.now() - t0 > ms) return { controllers: d.controllers, queues: d.queues };
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  stop(): Promise<void> {
    return this.service.stop();
  }
}
