// The zone state machine edge by edge, and the resource counts and write-pointer rules of ZoneSet (ZNS 1.1 §2.1).
import { describe, expect, it } from 'vitest';
import { DNR, Status, ZoneSendAction } from '../../protocol/index.js';
import { itChecksEveryEdge } from '../../test/fixtures/state-table.js';
import { ZONE_TRANSITIONS, ZoneSet, zoneGeometry, type ZoneState } from './zoned.js';

const geometry = { zoneSize: 16, zoneCap: 12, nrZones: 4, maxOpen: 2, maxActive: 3 };

describe('zone state table', () => {
  itChecksEveryEdge<ZoneState>(ZONE_TRANSITIONS, 'empty', () => {
    const zs = new ZoneSet(geometry);
    return {
      get state() {
        return zs.state(1);
      },
      setState: (next: ZoneState) => zs.setState(1, next),
    };
  });

  it('counts open and active zones through every edge, and puts the write pointer at the start or capacity', () => {
    const zs = new ZoneSet(geometry);
    zs.setState(0, 'imp-open');
    zs.setState(1, 'exp-open');
    zs.setState(2, 'imp-open');
    zs.setState(2, 'closed');
    expect([zs.openCount, zs.activeCount]).toEqual([2, 3]);
    zs.setState(1, 'full');
    expect([zs.openCount, zs.activeCount, zs.wp(1)]).toEqual([1, 2, 16 + 12]);
    zs.setState(2, 'read-only');
    zs.setState(0, 'offline');
    expect([zs.openCount, zs.activeCount]).toEqual([0, 0]);
    zs.setState(1, 'empty');
    expect(zs.wp(1)).toBe(16);
  });
});

describe('ZoneSet rules', () => {
  it('a write moves the pointer and fills the zone at its capacity, not at its size', () => {
    const zs = new ZoneSet(geometry);
    expect(zs.write(0, 12)).toBe(0);
    expect([zs.state(0), zs.wp(0), zs.openCount, zs.activeCount]).toEqual(['full', 12, 0, 0]);
    expect(zs.write(12, 1)).toBe(Status.ZONE_FULL | DNR);
    expect(zs.write(16, 13)).toBe(Status.ZONE_BOUNDARY_ERROR | DNR);
    expect(zs.write(15, 2)).toBe(Status.ZONE_BOUNDARY_ERROR | DNR);
    expect(zs.write(17, 1)).toBe(Status.ZONE_INVALID_WRITE | DNR);
    expect(zs.state(1)).toBe('empty');
  });

  it('append returns the LBA and refuses past the capacity without moving anything', () => {
    const zs = new ZoneSet(geometry);
    expect(zs.append(32, 5)).toBe(32);
    expect(zs.append(32, 5)).toBe(37);
    expect(zs.append(32, 3)).toBe(-(Status.ZONE_BOUNDARY_ERROR | DNR));
    expect(zs.wp(2)).toBe(42);
    expect(zs.append(32, 2)).toBe(42);
    expect(zs.state(2)).toBe('full');
  });

  it('an explicit open closes an implicitly opened zone for room; Select All Open fails whole when it cannot fit', () => {
    const zs = new ZoneSet({ ...geometry, maxActive: 0 });
    expect(zs.write(0, 1)).toBe(0);
    expect(zs.write(16, 1)).toBe(0);
    zs.apply(ZoneSendAction.CLOSE, zs.targets(ZoneSendAction.CLOSE, 0, true));
    expect([zs.state(0), zs.state(1)]).toEqual(['closed', 'closed']);
    expect(zs.write(32, 1)).toBe(0);
    expect(zs.check(ZoneSendAction.OPEN, zs.targets(ZoneSendAction.OPEN, 0, true))).toBe(0);
    zs.apply(ZoneSendAction.OPEN, zs.targets(ZoneSendAction.OPEN, 0, true));
    expect([zs.state(0), zs.state(1), zs.state(2)]).toEqual(['exp-open', 'exp-open', 'closed']);
    expect(zs.check(ZoneSendAction.OPEN, [2])).toBe(Status.ZONE_TOO_MANY_OPEN | DNR);
    expect(zs.check(ZoneSendAction.OPEN, zs.targets(ZoneSendAction.OPEN, 0, true))).toBe(Status.ZONE_TOO_MANY_OPEN | DNR);
  });

  it('snapshot and restore: open zones come back closed (or empty when never written); another geometry is refused', () => {
    const zs = new ZoneSet(geometry);
    zs.write(0, 3);
    zs.apply(ZoneSendAction.OPEN, [1]);
    zs.write(32, 12);
    const again = new ZoneSet(geometry);
    expect(again.restore(zs.snapshot())).toBe(true);
    expect([0, 1, 2, 3].map((z) => [again.state(z), again.wp(z)])).toEqual([
      ['closed', 3],
      ['empty', 16],
      ['full', 44],
      ['empty', 48],
    ]);
    expect([again.openCount, again.activeCount]).toEqual([0, 1]);
    expect(new ZoneSet({ ...geometry, zoneCap: 16 }).restore(zs.snapshot())).toBe(false);
    const bad = zs.snapshot();
    (bad.zones[1] as [number, number])[1] = 16 + 13;
    expect(new ZoneSet(geometry).restore(bad)).toBe(false);
  });

  it('geometry: power-of-two zone size, whole zones, capacity within the zone, open within active', () => {
    expect(zoneGeometry({ zoneSize: 65536 }, 512, 262144)).toEqual({ zoneSize: 128, zoneCap: 128, nrZones: 4, maxOpen: 0, maxActive: 0 });
    expect(zoneGeometry({ zoneSize: 4096, zoneCapacity: 4096 }, 4096, 4096)).toMatchObject({ zoneSize: 1, nrZones: 1 });
    expect(zoneGeometry({ zoneSize: 256 }, 512, 262144)).toMatchObject({ field: 'zoned.zoneSize' });
    expect(zoneGeometry({ zoneSize: 2 ** 31 }, 512, 2 ** 31)).toMatchObject({ zoneSize: 2 ** 22, nrZones: 1 });
    expect(zoneGeometry({ zoneSize: 2 ** 32 }, 512, 2 ** 33)).toMatchObject({ zoneSize: 2 ** 23, nrZones: 2 });
    expect(zoneGeometry({ zoneSize: 3 * 2 ** 32 }, 512, 3 * 2 ** 33)).toMatchObject({ field: 'zoned.zoneSize' });
    expect(zoneGeometry({ zoneSize: 65536, zoneCapacity: 100 }, 512, 262144)).toMatchObject({ field: 'zoned.zoneCapacity' });
    expect(zoneGeometry({ zoneSize: 65536, maxOpen: 0xffff_ffff, maxActive: 1 }, 512, 262144)).toMatchObject({ field: 'zoned.maxOpen' });
  });
});
