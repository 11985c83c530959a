import { describe, expect, it } from 'vitest';
import { anaGroupIds, describeDifference, descriptionDigest, type GroupDescription } from './description.js';
import { DescriptionMismatchError } from './errors.js';

const base: GroupDescription = {
  subsystems: [
    {
      nqn: 'nqn.2024-01.io.example:s1',
      namespaces: [
        { nsid: 1, size: '1073741824', blockSize: 512, anagrpid: 1 },
        { nsid: 2, size: '1073741824', blockSize: 512, anagrpid: 2 },
      ],
    },
  ],
};

describe('gateway description', () => {
  it('is order-insensitive', () => {
    const shuffled = { subsystems: [{ ...base.subsystems[0]!, namespaces: [...base.subsystems[0]!.namespaces].reverse() }] };
    expect(describeDifference(shuffled, base)).toBeUndefined();
    expect(descriptionDigest(shuffled)).toBe(descriptionDigest(base));
    expect(anaGroupIds(base)).toEqual([1, 2]);
  });

  it('names the difference in one line', () => {
    const bs = structuredClone(base);
    bs.subsystems[0]!.namespaces[1]!.blockSize = 4096;
    expect(describeDifference(bs, base)).toBe(
      "subsystem nqn.2024-01.io.example:s1 namespace 2: block size 4096 here, 512 in the group's record",
    );
    const fewer = structuredClone(base);
    fewer.subsystems[0]!.namespaces.pop();
    expect(describeDifference(fewer, base)).toMatch(/namespace 2 is in the group's record but not served here/);
    const other = { subsystems: [{ nqn: 'nqn.2024-01.io.example:s2', namespaces: [] }] };
    expect(describeDifference(other, base)).toMatch(/subsystem nqn.2024-01.io.example:s2 is served here/);
    const err = new DescriptionMismatchError('g1', describeDifference(bs, base)!);
    expect(err.code).toBe('NVMEOF_ERR_GATEWAY_DESCRIPTION');
    expect(err.message).toMatch(/^gateway group 'g1': subsystem/);
  });
});
