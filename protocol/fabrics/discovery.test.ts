import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  Adrfam,
  DISCOVERY_NQN,
  DISC_LOG_ENTRY_SIZE,
  DISC_LOG_HEADER_SIZE,
  DiscLogEntryOffset,
  DiscLogHeaderOffset,
  DiscSubtype,
  Treq,
  Trtype,
  decodeDiscLogEntry,
  decodeDiscLogHeader,
  decodeDiscoveryLog,
  discoveryLogSize,
  encodeDiscLogEntry,
  encodeDiscoveryLog,
} from './discovery.js';
import type { DiscLogEntry } from './discovery.js';
import { sliceLogPage } from '../nvme/log-pages.js';
import { bytes } from '../testing/fixture-builder.js';

describe('discovery log layout (NVMe-oF 1.1 Figures 31/32)', () => {
  it('sizes, offsets and constants', () => {
    expect(DISCOVERY_NQN).toBe('nqn.2014-08.org.nvmexpress.discovery');
    expect(DISC_LOG_HEADER_SIZE).toBe(1024);
    expect(DISC_LOG_ENTRY_SIZE).toBe(1024);
    expect(DiscLogHeaderOffset).toEqual({ genctr: 0, numrec: 8, recfmt: 16 });
    expect(DiscLogEntryOffset).toEqual({
      trtype: 0, adrfam: 1, subtype: 2, treq: 3, portid: 4, cntlid: 6, asqsz: 8, eflags: 10, trsvcid: 32, subnqn: 256, traddr: 512, tsas: 768,
    });
    expect(Trtype).toEqual({ RDMA: 1, FC: 2, TCP: 3, LOOP: 254 });
    expect(Adrfam).toEqual({ IPV4: 1, IPV6: 2, IB: 3, FC: 4, INTRA_HOST: 254 });
    expect(DiscSubtype).toEqual({ REFERRAL: 1, NVME: 2, CURRENT: 3 });
    expect(Treq.DISABLE_SQFLOW).toBe(4);
  });
});

const current: DiscLogEntry = {
  trtype: Trtype.TCP, adrfam: Adrfam.IPV4, subtype: DiscSubtype.CURRENT, treq: Treq.DISABLE_SQFLOW, portid: 1, cntlid: 0xffff,
  asqsz: 32, eflags: 0, trsvcid: '4420', subnqn: DISCOVERY_NQN, traddr: '10.0.2.15', tsas: { sectype: 0 },
};
const subsys: DiscLogEntry = { ...current, subtype: DiscSubtype.NVME, subnqn: 'nqn.2024-01.io.nvme-lab:kernel-target' };
const rdma: DiscLogEntry = {
  trtype: Trtype.RDMA, adrfam: Adrfam.IPV6, subtype: DiscSubtype.REFERRAL, treq: 2, portid: 0xabcd, cntlid: 0xfffe, asqsz: 128,
  eflags: 0x7, trsvcid: '4420', subnqn: DISCOVERY_NQN, traddr: 'fe80::1', tsas: bytes(256).u8(0, 1).u8(1, 2).u8(255, 9).build(),
};

function entryWire(e: DiscLogEntry, tsas: (b: ReturnType<typeof bytes>) => void): Buffer {
  const b = bytes(1024).u8(0, e.trtype).u8(1, e.adrfam).u8(2, e.subtype).u8(3, e.treq).u16(4, e.portid).u16(6, e.cntlid)
    .u16(8, e.asqsz).u16(10, e.eflags).ascii(32, e.trsvcid).ascii(256, e.subnqn).ascii(512, e.traddr);
  tsas(b);
  return b.build();
}

describe.each([
  { name: 'current discovery subsystem', e: current, wire: entryWire(current, (b) => b.u8(768, 0)) },
  { name: 'NVM subsystem', e: subsys, wire: entryWire(subsys, (b) => b.u8(768, 0)) },
  { name: 'RDMA referral with raw TSAS', e: rdma, wire: entryWire(rdma, (b) => b.u8(768, 1).u8(769, 2).u8(1023, 9)) },
])('discovery log entry: $name', ({ e, wire }) => {
  it('encodes', () => expect(encodeDiscLogEntry(e)).toEqual(wire));
  it('decodes', () => expect(decodeDiscLogEntry(wire)).toEqual(e));
});

describe('whole discovery log', () => {
  const log = encodeDiscoveryLog({ genctr: 2n, entries: [current, subsys] });
  it('has a header with GENCTR, NUMREC, RECFMT and entries from 1024', () => {
    expect(log.length).toBe(3072);
    expect(log.subarray(0, 1024)).toEqual(bytes(1024).u64(0, 2n).u64(8, 2n).u16(16, 0).build());
    expect(log.subarray(1024, 2048)).toEqual(encodeDiscLogEntry(current));
    expect(log.subarray(2048)).toEqual(encodeDiscLogEntry(subsys));
    expect(discoveryLogSize(2)).toBe(3072);
  });
  it('decodes', () => {
    expect(decodeDiscLogHeader(log)).toEqual({ genctr: 2n, numrec: 2, recfmt: 0 });
    expect(decodeDiscoveryLog(log)).toEqual({ genctr: 2n, numrec: 2, recfmt: 0, entries: [current, subsys], truncated: false });
  });
  it('serves windows the way nvme-cli reads them (header first, then entries at LPO 1024)', () => {
    const header = sliceLogPage(log, 0n, 1024);
    expect(decodeDiscoveryLog(header)).toMatchObject({ numrec: 2, entries: [], truncated: true });
    const second = sliceLogPage(log, 2048n, 1024);
    expect(decodeDiscLogEntry(second)).toEqual(subsys);
    expect(sliceLogPage(log, 3072n, 1024)).toEqual(Buffer.alloc(1024));
  });
  it('a short header read still yields GENCTR and NUMREC', () => {
    expect(decodeDiscLogHeader(log.subarray(0, 16))).toEqual({ genctr: 2n, numrec: 2, recfmt: 0 });
  });
  it('decodes space padded TRSVCID/TRADDR too', () => {
    const b = bytes(1024).u8(0, 3).spacePadded(32, 32, '8009').spacePadded(512, 256, '192.168.1.10').build();
    expect(decodeDiscLogEntry(b)).toMatchObject({ trsvcid: '8009', traddr: '192.168.1.10' });
  });
});

describe('discovery properties', () => {
  const str = (max: number): fc.Arbitrary<string> => fc.stringMatching(new RegExp(`^[a-zA-Z0-9.:-]{0,${max}}$`));
  const entry: fc.Arbitrary<DiscLogEntry> = fc.record({
    trtype: fc.constant(3),
    adrfam: fc.integer({ min: 0, max: 255 }),
    subtype: fc.integer({ min: 0, max: 255 }),
    treq: fc.integer({ min: 0, max: 255 }),
    portid: fc.integer({ min: 0, max: 0xffff }),
    cntlid: fc.integer({ min: 0, max: 0xffff }),
    asqsz: fc.integer({ min: 0, max: 0xffff }),
    eflags: fc.integer({ min: 0, max: 0xffff }),
    trsvcid: str(31),
    subnqn: str(223),
    traddr: str(255),
    tsas: fc.record({ sectype: fc.integer({ min: 0, max: 255 }) }),
  });
  it('decode ∘ encode is the identity; decoders never throw', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), fc.array(entry, { maxLength: 4 }), (genctr, entries) => {
        expect(decodeDiscoveryLog(encodeDiscoveryLog({ genctr, entries }))).toEqual({ genctr, numrec: entries.length, recfmt: 0, entries, truncated: false });
      }),
      { numRuns: 60 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2100 }).map((a) => Buffer.from(a)), (b) => {
        decodeDiscoveryLog(b);
        decodeDiscLogEntry(b, 1024);
      }),
      { numRuns: 60 },
    );
  });
});
