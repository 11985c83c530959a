// The hints a reservation status gets: which host ID the target saw and where it came from, and EDS for a report.
import { describe, expect, it } from 'vitest';
import { DNR, NvmeStatusError, Status } from '../protocol/index.js';
import type { HostIdentity } from './host-identity.js';
import { resvHint } from './resv.js';

const id = (hostid: string): HostIdentity => ({ hostnqn: 'nqn.x:h', hostid: '0f0e0d0c-0b0a-4908-8706-050403020100', source: { hostnqn: 'flag', hostid } });
const status = (sc: number): NvmeStatusError => new NvmeStatusError(sc | DNR, 1, 'X');

describe('resvHint', () => {
  it('HOST_ID_INCONSIST on a report without EDS: add -e/--eds; with EDS or on another verb: nothing to suggest', () => {
    expect(resvHint('resv-report', status(Status.HOST_ID_INCONSIST), id('flag'), false)).toBe('the controller uses 128-bit host IDs, which only the extended data structure carries: add -e/--eds, as nvme-cli does');
    expect(resvHint('resv-report', status(Status.HOST_ID_INCONSIST), id('flag'), true)).toBeUndefined();
    expect(resvHint('resv-register', status(Status.HOST_ID_INCONSIST), id('flag'), false)).toBeUndefined();
  });

  it('RESERVATION_CONFLICT names the host ID and its source; a shared file ID asks for -I', () => {
    expect(resvHint('resv-acquire', status(Status.RESERVATION_CONFLICT), id('/etc/nvme/hostid'), true)).toBe(
      'the target knows this host by host ID 0f0e0d0c-0b0a-4908-8706-050403020100 (/etc/nvme/hostid); host NQNs that share a host ID are one registrant, so give each host its own with -I UUID',
    );
    expect(resvHint('resv-acquire', status(Status.RESERVATION_CONFLICT), id('flag'), true)).toMatch(/\(-I\); another registrant holds the reservation/);
    expect(resvHint('resv-acquire', status(Status.INVALID_FIELD), id('flag'), true)).toBeUndefined();
  });
});
