import { describe, expect, it } from 'vitest';
import {
  CRD_MASK,
  DNR,
  MORE,
  Status,
  makeStatus,
  statusCrd,
  statusDnr,
  statusMore,
  statusName,
  statusSc,
  statusSct,
} from './status.js';

describe('status values (NVMe Base 2.0 §4.6.1 Figures 96-97, Linux NVME_SC_*)', () => {
  it.each([
    ['SUCCESS', 0x000], ['INVALID_OPCODE', 0x001], ['INVALID_FIELD', 0x002], ['CMDID_CONFLICT', 0x003],
    ['DATA_XFER_ERROR', 0x004], ['INTERNAL', 0x006], ['ABORT_REQ', 0x007], ['INVALID_NS', 0x00b],
    ['CMD_SEQ_ERROR', 0x00c], ['SGL_INVALID_LAST', 0x00d], ['SGL_INVALID_COUNT', 0x00e], ['SGL_INVALID_DATA', 0x00f],
    ['SGL_INVALID_TYPE', 0x011], ['SGL_INVALID_OFFSET', 0x016], ['HOST_ID_INCONSIST', 0x018],
    ['KA_TIMEOUT_EXPIRED', 0x019], ['KA_TIMEOUT_INVALID', 0x01a], ['NS_WRITE_PROTECTED', 0x020],
    ['TRANSIENT_TRANSPORT', 0x022], ['LBA_RANGE', 0x080], ['CAP_EXCEEDED', 0x081], ['NS_NOT_READY', 0x082],
    ['RESERVATION_CONFLICT', 0x083], ['INVALID_QID', 0x101], ['INVALID_QUEUE_SIZE', 0x102], ['ASYNC_LIMIT', 0x105],
    ['INVALID_LOG_PAGE', 0x109], ['FEATURE_NOT_SAVEABLE', 0x10d], ['FEATURE_NOT_CHANGEABLE', 0x10e],
    ['CONNECT_INCOMPATIBLE_FORMAT', 0x180], ['CONNECT_CTRL_BUSY', 0x181], ['CONNECT_INVALID_PARAM', 0x182],
    ['CONNECT_RESTART_DISC', 0x183], ['CONNECT_INVALID_HOST', 0x184], ['DISCOVERY_RESTART', 0x190], ['AUTH_REQUIRED', 0x191],
    ['CONFLICTING_ATTRIBUTES', 0x180], ['INVALID_PI', 0x181], ['WRITE_TO_READ_ONLY', 0x182],
    ['WRITE_FAULT', 0x280], ['READ_ERROR', 0x281], ['COMPARE_FAILED', 0x285], ['ACCESS_DENIED', 0x286], ['UNWRITTEN_BLOCK', 0x287],
    ['INTERNAL_PATH_ERROR', 0x300], ['ANA_PERSISTENT_LOSS', 0x301], ['ANA_INACCESSIBLE', 0x302], ['ANA_TRANSITION', 0x303],
    ['CTRL_PATH_ERROR', 0x360], ['HOST_PATH_ERROR', 0x370], ['HOST_ABORTED_CMD', 0x371],
  ] as const)('%s = %#x', (name, value) => {
    expect(Status[name]).toBe(value);
  });

  it('has the flag constants', () => {
    expect(DNR).toBe(0x4000);
    expect(MORE).toBe(0x2000);
    expect(CRD_MASK).toBe(0x1800);
  });
});

describe('status accessors', () => {
  it('splits SCT, SC, CRD, MORE, DNR', () => {
    const s = 0x4000 | 0x2000 | 0x1000 | 0x285;
    expect(statusSct(s)).toBe(2);
    expect(statusSc(s)).toBe(0x85);
    expect(statusCrd(s)).toBe(2);
    expect(statusMore(s)).toBe(true);
    expect(statusDnr(s)).toBe(true);
    expect(statusDnr(0x285)).toBe(false);
  });
  it('builds statuses', () => {
    expect(makeStatus(1, 0x84, { dnr: true })).toBe(0x4184);
    expect(makeStatus(3, 0x03)).toBe(0x303);
    expect(makeStatus(0, 6, { crd: 1, more: true })).toBe(0x2806);
  });
});

describe('statusName', () => {
  it.each([
    [0x0000, undefined, 'SUCCESS'],
    [0x4080, undefined, 'LBA_RANGE|DNR'],
    [0x4006, undefined, 'INTERNAL|DNR'],
    [0x4184, 'fabrics', 'CONNECT_INVALID_HOST|DNR'],
    [0x4182, undefined, 'CONNECT_INVALID_PARAM|DNR'],
    [0x4182, 'admin', 'CONNECT_INVALID_PARAM|DNR'],
    [0x4182, 'io', 'WRITE_TO_READ_ONLY|DNR'],
    [0x0180, 'io', 'CONFLICTING_ATTRIBUTES'],
    [0x0109, 'admin', 'INVALID_LOG_PAGE'],
    [0x0302, 'io', 'ANA_INACCESSIBLE'],
    [0x2806, undefined, 'INTERNAL|CRD1|MORE'],
    [0x0722, undefined, 'SCT7:SC0x22'],
    [0x4285, 'io', 'COMPARE_FAILED|DNR'],
  ] as const)('%#x (%s) → %s', (s, ctx, name) => {
    expect(statusName(s, ctx)).toBe(name);
  });
});
