// Our initiator's Verify, Write Uncorrectable, Supported Log Pages, Feature Identifiers Supported and Effects, Host
// Behavior Support and Namespace Write Protection Config against our target over 127.0.0.1.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { FeatureEffects, HostBehaviorOffset, InvalidArgumentError, NwpState, connect, type Controller } from '../../initiator/index.js';
import { Status, DNR } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';
import { pattern } from '../fixtures/data-pattern.js';
import { fullStatusOf } from '../fixtures/status-of.js';

const NQN = 'nqn.2024-01.io.test:e2e-nvm-cmds';
const cleanups = cleanupAfterEach();

async function open(): Promise<Controller> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  const { port } = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
  await t.addSubsystem({ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '16M' } }] });
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 1 });
  cleanups.push(() => c.disconnect());
  return c;
}

describe('initiator NVM commands', () => {
  it('writeUncorrectable makes exactly its range fail READ_ERROR for read and verify until rewritten', async () => {
    const c = await open();
    const ns = c.namespace(1);
    const data = pattern(8 * 512, 3);
    await ns.write(0, data);
    await ns.verify(0, ns.maxBlocksPerCommand);
    await ns.writeUncorrectable(3, 2); // LBAs 3 and 4
    for (const lba of [0, 2, 5, 7]) expect((await ns.read(lba, 1)).equals(data.subarray(lba * 512, lba * 512 + 512)), `lba ${lba}`).toBe(true);
    for (const lba of [3, 4]) expect(await fullStatusOf(ns.read(lba, 1)), `lba ${lba}`).toBe(Status.READ_ERROR | DNR);
    expect(await fullStatusOf(ns.verify(0, 8))).toBe(Status.READ_ERROR | DNR);
    expect(await fullStatusOf(ns.verify(5, 3))).toBe(0);
    await ns.write(3, data.subarray(3 * 512, 5 * 512));
    expect((await ns.read(0, 8)).equals(data)).toBe(true);
    // Past the end and zero blocks are caught before anything is sent.
    const blocks = Number(ns.blocks);
    await expect(ns.verify(blocks, 1)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(ns.writeUncorrectable(0, 0)).rejects.toBeInstanceOf(InvalidArgumentError);
    // Beyond one command's 65,536 blocks the range is split.
    await ns.verify(0, blocks);
    await ns.writeUncorrectable(0, blocks);
    expect(await fullStatusOf(ns.read(blocks - 1, 1))).toBe(Status.READ_ERROR | DNR);
    await ns.writeZeroes(0, blocks);
    await ns.verify(0, blocks);
  });

  it('copy: ranges in order to the destination, in both descriptor formats; limits answered by the target', async () => {
    const c = await open();
    const ns = c.namespace(1);
    const a = pattern(2 * 512, 11);
    const b = pattern(3 * 512, 12);
    await ns.write(10, a);
    await ns.write(40, b);
    for (const format of [0, 1] as const) {
      const dest = 1000 + format * 100;
      await ns.copy(
        [
          { lba: 40, blocks: 3 },
          { lba: 10, blocks: 2 },
        ],
        dest,
        { format },
      );
      expect((await ns.read(dest, 5)).equals(Buffer.concat([b, a]))).toBe(true);
    }
    expect(await fullStatusOf(ns.copy([{ lba: 0, blocks: 1025 }], 5000))).toBe(Status.CMD_SIZE_LIMIT_EXCEEDED | DNR);
    await expect(ns.copy([], 0)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(ns.copy([{ lba: 0, blocks: 65537 }], 0)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(ns.copy([{ lba: 0, blocks: 2 }], Number(ns.blocks) - 1)).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it('reads the supported log pages and feature effects; sets and reads Host Behavior Support', async () => {
    const c = await open();
    expect(await c.supportedLogPages()).toEqual(expect.arrayContaining([0x00, 0x05, 0x12]));
    const fx = await c.featureEffects();
    expect((fx[0x16] ?? 0) & FeatureEffects.FSUPP).toBe(FeatureEffects.FSUPP);
    expect((fx[0x84] ?? 0) & FeatureEffects.NSCPE).toBe(FeatureEffects.NSCPE);
    expect((await c.hostBehavior()).equals(Buffer.alloc(512))).toBe(true);
    const hbs = Buffer.alloc(512);
    hbs[HostBehaviorOffset.acre] = 1;
    await c.setHostBehavior(hbs);
    expect((await c.hostBehavior()).equals(hbs)).toBe(true);
    hbs[HostBehaviorOffset.lbafee] = 2;
    expect(await fullStatusOf(c.setHostBehavior(hbs))).toBe(Status.INVALID_FIELD | DNR);
    await expect(c.setHostBehavior(Buffer.alloc(511))).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it('abort: nothing waiting is "not aborted"; SQID and CID outside 16 bits are caught before sending', async () => {
    const c = await open();
    expect(await c.abort(1, 0xffff)).toBe(false);
    expect(await c.abort(0, 0)).toBe(false);
    await expect(c.abort(0x1_0000, 0)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(c.abort(0, -1)).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it('format: the namespace comes back with 4096-byte blocks and an eighth of the LBAs, then 512 again', async () => {
    const c = await open();
    const before = c.namespace(1);
    expect([before.blockSize, before.blocks]).toEqual([512, 32768n]);
    await c.format(1, 1);
    const ns = c.namespace(1);
    expect([ns.blockSize, ns.blocks]).toEqual([4096, 4096n]);
    const data = pattern(4096, 7);
    await ns.write(4095, data);
    expect((await ns.read(4095, 1)).equals(data)).toBe(true);
    await c.format(1, 0, { ses: 1 });
    const back = c.namespace(1);
    expect([back.blockSize, back.blocks]).toEqual([512, 32768n]);
    expect((await back.read(32760, 8)).equals(Buffer.alloc(4096))).toBe(true);
    expect(await fullStatusOf(c.format(1, 2))).toBe(Status.INVALID_FORMAT | DNR);
  });

  it('write protection: writes fail NS_WRITE_PROTECTED while set, reads go on', async () => {
    const c = await open();
    const ns = c.namespace(1);
    expect(await c.writeProtect(1)).toBe(NwpState.NONE);
    await c.setWriteProtect(1, NwpState.WRITE_PROTECT);
    expect(await c.writeProtect(1)).toBe(NwpState.WRITE_PROTECT);
    expect(await fullStatusOf(ns.write(0, Buffer.alloc(512)))).toBe(Status.NS_WRITE_PROTECTED);
    await ns.read(0, 1);
    await c.setWriteProtect(1, NwpState.NONE);
    await ns.write(0, Buffer.alloc(512));
    expect(await fullStatusOf(c.setWriteProtect(1, NwpState.PERMANENT))).toBe(Status.INVALID_FIELD | DNR);
  });
});
