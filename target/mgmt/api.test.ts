// HTTP edge cases of the management API with a stand-in service: limits, malformed input, error mapping.
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../../protocol/index.js';
import type { TargetConfig } from '../model/config.js';
import { isLoopback, startApi, type ApiHandle, type MgmtService } from './api.js';
import { cleanupAfterEach } from '../../test/fixtures/cleanups.js';

const cleanups = cleanupAfterEach();

function fakeService(over: Partial<MgmtService> = {}): MgmtService {
  const cfg: TargetConfig = { ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: 'nqn.2024-01.io.test:a', namespaces: [] }] };
  const unused = (): never => {
    throw new Error('not used');
  };
  return {
    addPort: unused,
    removePort: unused,
    boundPorts: () => [{ id: 1, addr: '127.0.0.1', port: 4420 }],
    addSubsystem: unused,
    removeSubsystem: unused,
    addNamespace: unused,
    removeNamespace: unused,
    updateNamespace: unused,
    updateSubsystem: unused,
    addAllowedHost: unused,
    removeAllowedHost: unused,
    setAnaState: unused,
    addReferral: unused,
    removeReferral: unused,
    setFaults: unused,
    addFaultRule: unused,
    removeFaultRule: unused,
    clearFaultRules: unused,
    listFaultRules: () => [],
    setHostAuth: unused,
    clearHostAuth: unused,
    listHostAuth: () => [],
    attachNamespaceHost: unused,
    detachNamespaceHost: unused,
    namespaceHosts: unused,
    reservationStatus: unused,
    getConfig: () => structuredClone(cfg),
    listControllers: () => [],
    stats: () => ({ subsystems: {}, pduErrorsByFes: {}, dataDigestErrors: 0, katoExpiries: 0, connections: { accepted: 0, active: 0, rejected: 0 }, connects: { ok: 0, failed: 0 }, hostRefusals: { byReason: {}, suppressed: 0 } }),
    ...over,
  };
}

async function api(over: Partial<MgmtService> = {}, maxBodyBytes?: number): Promise<ApiHandle> {
  const h = await startApi(fakeService(over), { listen: '127.0.0.1:0', ...(maxBodyBytes !== undefined ? { maxBodyBytes } : {}) });
  cleanups.push(() => h.close());
  return h;
}

/** Raw request so paths fetch would normalise (or refuse) reach the server as written. */
function raw(h: ApiHandle, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: h.port, method, path, headers: body !== undefined ? { 'content-length': Buffer.byteLength(body) } : {} }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('management API edge cases', () => {
  it('knows loopback addresses', () => {
    expect(['127.0.0.1', '127.9.8.7', '::1', '::ffff:127.0.0.1'].every(isLoopback)).toBe(true);
    expect(['0.0.0.0', '::', '10.0.0.1', '::ffff:10.0.0.1', '128.0.0.1'].some(isLoopback)).toBe(false);
  });

  it('rejects oversized bodies with 413 and empty or malformed bodies with 400', async () => {
    const h = await api({}, 64);
    expect((await raw(h, 'POST', '/subsystems', JSON.stringify({ nqn: 'x'.repeat(100) }))).status).toBe(413);
    expect((await raw(h, 'POST', '/subsystems', '')).status).toBe(400);
    expect((await raw(h, 'POST', '/subsystems', '[1,')).status).toBe(400);
    expect((await raw(h, 'GET', '/subsystems/%E0%A4%A')).status).toBe(400);
    expect((await raw(h, 'GET', '/ports/abc')).status).toBe(404);
    // Still serving after all of that.
    expect((await raw(h, 'GET', '/healthz')).status).toBe(200);
  });

  it('maps service refusals: InvalidArgumentError → 400 with its field, duplicates → 409, anything else → 409 with the message', async () => {
    const h = await api({
      setAnaState: () => {
        throw new InvalidArgumentError('anaGroup', 'must be 1..128');
      },
      addSubsystem: () => Promise.reject(new InvalidArgumentError('subsystems.nqn', 'nqn.2024-01.io.test:b already exists')),
      setFaults: () => {
        throw new Error('disk on fire');
      },
    });
    const ana = await raw(h, 'PUT', '/ports/1/ana/1', '{"state":"optimized"}');
    expect(ana.status).toBe(400);
    expect(JSON.parse(ana.body)).toEqual({ error: 'anaGroup: must be 1..128', path: 'anaGroup' });
    expect((await raw(h, 'POST', '/subsystems', '{"nqn":"nqn.2024-01.io.test:b"}')).status).toBe(409);
    const f = await raw(h, 'PUT', `/subsystems/${encodeURIComponent('nqn.2024-01.io.test:a')}/faults`, '{}');
    expect(f.status).toBe(409);
    expect(JSON.parse(f.body)).toEqual({ error: 'disk on fire' });
    expect((await raw(h, 'PUT', '/ports/1/ana/0', '{"state":"optimized"}')).status).toBe(400);
  });

  it('logs a refusal (4xx) at info with its status and reason and no stack; a 5xx at error with the stack', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    // Write-back into a directory that does not exist: the change applies, the save fails (500).
    const configPath = path.join(tmpdir(), `nvme-tcp-no-such-dir-${process.pid}`, 'target.json');
    const h = await startApi(
      fakeService({
        addSubsystem: () => Promise.reject(new InvalidArgumentError('subsystems.nqn', 'nqn.2024-01.io.test:b already exists')),
        addAllowedHost: () => undefined,
      }),
      { listen: '127.0.0.1:0', logger, configPath, writeBack: true },
    );
    cleanups.push(() => h.close());
    expect((await raw(h, 'POST', '/subsystems', '{"nqn":"nqn.2024-01.io.test:b"}')).status).toBe(409);
    expect((await raw(h, 'GET', '/nowhere')).status).toBe(404);
    expect((await raw(h, 'POST', `/subsystems/${encodeURIComponent('nqn.2024-01.io.test:a')}/hosts`, '{"nqn":"nqn.2024-01.io.test:h"}')).status).toBe(500);
    const refused = lines.filter((l) => l.msg === 'management request refused');
    expect(refused.map((l) => [l.level, l.status, l.reason, 'err' in l])).toEqual([
      [30, 409, 'subsystems.nqn: nqn.2024-01.io.test:b already exists', false],
      [30, 404, expect.stringMatching(/nowhere/), false],
    ]);
    const failed = lines.filter((l) => l.msg === 'management request failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: 50, status: 500, err: { stack: expect.stringMatching(/writing .*target\.json failed/) } });
    expect(lines.some((l) => l.level === 40)).toBe(false);
  });

  it('answers HEAD like GET without a body, and 405 with Allow for other methods', async () => {
    const h = await api();
    const head = await raw(h, 'HEAD', '/config');
    expect(head).toEqual({ status: 200, body: '' });
    const res = await fetch(`${h.url}/ports/1`, { method: 'PUT' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, DELETE');
  });

  it('close() is idempotent and frees the port', async () => {
    const h = await api();
    await Promise.all([h.close(), h.close()]);
    await expect(fetch(`${h.url}/healthz`)).rejects.toThrow();
  });
});
