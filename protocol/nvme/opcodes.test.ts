import { describe, expect, it } from 'vitest';
import { AdminOpcode, FABRICS_OPCODE, NvmOpcode, adminOpcodeName, nvmOpcodeName,
  opcodeLabel, opcodeDataDirection } from './opcodes.js';

describe('opcodes (NVMe Base 2.0 Figure 138, NVM Command Set 1.0 Figure 17)', () => {
  it.each([
    ['DELETE_SQ', 0x00], ['CREATE_SQ', 0x01], ['GET_LOG_PAGE', 0x02], ['DELETE_CQ', 0x04], ['CREATE_CQ', 0x05],
    ['IDENTIFY', 0x06], ['ABORT', 0x08], ['SET_FEATURES', 0x09], ['GET_FEATURES', 0x0a], ['ASYNC_EVENT', 0x0c],
    ['NS_MGMT', 0x0d], ['FW_COMMIT', 0x10], ['FW_DOWNLOAD', 0x11], ['NS_ATTACH', 0x15], ['KEEP_ALIVE', 0x18],
    ['DIRECTIVE_SEND', 0x19], ['DIRECTIVE_RECV', 0x1a], ['VIRT_MGMT', 0x1c], ['NVME_MI_SEND', 0x1d],
    ['NVME_MI_RECV', 0x1e], ['DBBUF', 0x7c], ['FORMAT_NVM', 0x80], ['SECURITY_SEND', 0x81],
    ['SECURITY_RECV', 0x82], ['SANITIZE', 0x84], ['GET_LBA_STATUS', 0x86],
  ] as const)('admin %s = %#x', (name, v) => {
    expect(AdminOpcode[name]).toBe(v);
    expect(adminOpcodeName(v)).toBe(name);
  });

  it.each([
    ['FLUSH', 0x00], ['WRITE', 0x01], ['READ', 0x02], ['WRITE_UNCOR', 0x04], ['COMPARE', 0x05],
    ['WRITE_ZEROES', 0x08], ['DSM', 0x09], ['VERIFY', 0x0c], ['RESV_REGISTER', 0x0d], ['RESV_REPORT', 0x0e],
    ['RESV_ACQUIRE', 0x11], ['RESV_RELEASE', 0x15],
  ] as const)('nvm %s = %#x', (name, v) => {
    expect(NvmOpcode[name]).toBe(v);
    expect(nvmOpcodeName(v)).toBe(name);
  });

  it('names fabrics and unknown opcodes', () => {
    expect(FABRICS_OPCODE).toBe(0x7f);
    expect(adminOpcodeName(0x7f)).toBe('FABRICS');
    expect(nvmOpcodeName(0x7f)).toBe('FABRICS');
    expect(adminOpcodeName(0xc3)).toBe('0xc3');
    expect(nvmOpcodeName(0x03)).toBe('0x03');
  });

  it('labels opcodes for stats with the spec mnemonics, and admin-0xNN / io-0xNN otherwise (256 per set)', () => {
    expect([0x06, 0x02, 0x0c, 0x18, 0x09].map((op) => opcodeLabel('admin', op))).toEqual(['identify', 'get-log-page', 'async-event', 'keep-alive', 'set-features']);
    expect([0x01, 0x02, 0x08, 0x09, 0x0d, 0x0e].map((op) => opcodeLabel('io', op))).toEqual(['write', 'read', 'write-zeroes', 'dsm', 'resv-register', 'resv-report']);
    expect([opcodeLabel('admin', 0xc3), opcodeLabel('io', 0x03), opcodeLabel('io', 0x7f)]).toEqual(['admin-0xc3', 'io-0x03', 'io-0x7f']);
    const all = new Set(Array.from({ length: 1024 }, (_, i) => opcodeLabel(i < 512 ? 'admin' : 'io', i)));
    expect(all.size).toBe(512);
  });

  it.each([
    [NvmOpcode.FLUSH, 'none'], [NvmOpcode.WRITE, 'h2c'], [NvmOpcode.READ, 'c2h'], [NvmOpcode.COMPARE, 'h2c'],
    [NvmOpcode.WRITE_ZEROES, 'none'], [NvmOpcode.DSM, 'h2c'], [NvmOpcode.RESV_REPORT, 'c2h'],
    [AdminOpcode.IDENTIFY, 'c2h'], [AdminOpcode.GET_LOG_PAGE, 'c2h'], [AdminOpcode.SET_FEATURES, 'h2c'],
    [AdminOpcode.KEEP_ALIVE, 'none'], [AdminOpcode.FW_DOWNLOAD, 'h2c'], [FABRICS_OPCODE, 'bidi'],
  ] as const)('direction of %#x is %s', (op, dir) => {
    expect(opcodeDataDirection(op)).toBe(dir);
  });
});
