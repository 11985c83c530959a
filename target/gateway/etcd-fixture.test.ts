import { describe, expect, it } from 'vitest';
import { startEtcd } from '../../test/fixtures/etcd.js';

describe('etcd fixture', () => {
  it('fails naming apt-get install etcd-server when etcd is missing', async () => {
    const path = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      await expect(startEtcd()).rejects.toThrow('apt-get install etcd-server');
    } finally {
      process.env.PATH = path;
    }
  });
});
