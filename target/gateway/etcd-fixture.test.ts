import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startEtcd } from '../../test/fixtures/etcd.js';

const VARS = ['PATH', 'NVME_TCP_ETCD', 'NVME_TCP_ETCD_ERROR', 'NVME_TCP_TOOLS_DIR'] as const;
const saved = Object.fromEntries(VARS.map((v) => [v, process.env[v]]));
const dirs: string[] = [];
afterEach(() => {
  for (const v of VARS) {
    if (saved[v] === undefined) delete process.env[v];
    else process.env[v] = saved[v];
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** No etcd anywhere: nothing on PATH (so no apt-get either), no override, an empty tools cache. */
function noEtcd(): void {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nvme-tools-'));
  dirs.push(dir);
  process.env['PATH'] = '/nonexistent';
  process.env['NVME_TCP_TOOLS_DIR'] = dir;
  delete process.env['NVME_TCP_ETCD'];
  delete process.env['NVME_TCP_ETCD_ERROR'];
}

describe('etcd fixture', () => {
  it('fails in one line naming the package and the variable when no etcd can be had', async () => {
    noEtcd();
    const err = await startEtcd().then(
      () => undefined,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(err?.code).toBe('TOOL_MISSING');
    expect(err?.message).toMatch(/^etcd: .*apt-get install etcd-server.*NVME_TCP_ETCD=/);
    expect(err?.message).not.toContain('\n');
  });

  it('names NVME_TCP_ETCD when it points at something that does not run', async () => {
    noEtcd();
    process.env['NVME_TCP_ETCD'] = '/nonexistent/etcd';
    await expect(startEtcd()).rejects.toThrow('etcd: NVME_TCP_ETCD=/nonexistent/etcd does not run');
  });

  it("fails with the global setup's line when the setup could not provide one", async () => {
    noEtcd();
    process.env['NVME_TCP_ETCD_ERROR'] = 'etcd: set up said no: fix it';
    await expect(startEtcd()).rejects.toThrow(/^etcd: set up said no: fix it$/);
  });
});
