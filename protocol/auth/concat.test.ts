// Secure channel concatenation in DH-HMAC-CHAP (TP 8018; Linux host/auth.c nvme_auth_secure_concat, target
// fabrics-cmd-auth.c nvmet_auth_negotiate/reply): SC_C values and their refusals, SC_C in the response HMACs, C2 with
// S2 = 0, and the generated PSK both sides derive. Expected bytes are built here with node:crypto, not the encoder.
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DhGroupId, FailureExplanation, HashId, ScC } from './constants.js';
import { hostResponse } from './crypto.js';
import { DhchapController, DhchapHost, generatedPsks, type DhchapControllerOptions, type DhchapHostOptions, type DhchapHostStep } from './dhchap.js';
import { generateDhchapKey } from './keys.js';
import { decodeAuthMessage, encodeAuthMessage } from './messages.js';
import type { AuthMessage, DhchapReply } from './messages.js';

const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100';
const SUBNQN = 'nqn.2024-01.io.example:concat';
const key = generateDhchapKey({ hmac: 1, hostnqn: HOSTNQN });
const ctrlKey = generateDhchapKey({ hmac: 1, hostnqn: SUBNQN });

function run(host: DhchapHost, ctrl: DhchapController, tamper?: (m: AuthMessage) => AuthMessage): { final: DhchapHostStep; sent: AuthMessage[] } {
  const sent: AuthMessage[] = [];
  let step = host.next();
  for (let i = 0; i < 16; i++) {
    if (step.kind === 'send') {
      let payload = step.payload;
      const d = decodeAuthMessage(payload);
      if (d.ok) {
        const m = tamper ? tamper(d.message) : d.message;
        sent.push(m);
        if (tamper) payload = encodeAuthMessage(m);
      }
      ctrl.handleSend(payload);
      step = host.next();
    } else if (step.kind === 'receive') {
      const r = ctrl.handleReceive(step.allocationLength);
      if (r.kind === 'status') return { final: { kind: 'failed', error: host.abort('status') }, sent };
      step = host.next(r.payload);
    } else break;
  }
  return { final: step, sent };
}

function pair(h: Partial<DhchapHostOptions>, c: Partial<DhchapControllerOptions>): { host: DhchapHost; ctrl: DhchapController } {
  return {
    host: new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: key, transactionId: 7, ...h }),
    ctrl: new DhchapController({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: key, ...c }),
  };
}

describe('secure channel concatenation (DH-HMAC-CHAP)', () => {
  it('NEWTLSPSK: SC_C 02h on the wire, C2 with S2 = 0, and both sides derive the same generated PSKs', () => {
    const { host, ctrl } = pair({ concat: 'new' }, { concat: 'new' });
    const { final, sent } = run(host, ctrl);
    expect(final.kind).toBe('done');
    const neg = sent[0] as Extract<AuthMessage, { type: 'negotiate' }>;
    expect(neg.scC).toBe(0x02);
    const reply = sent[1] as DhchapReply;
    expect(reply.cvalid).toBe(true);
    expect(reply.seqnum).toBe(0);
    expect(reply.challenge.some((b) => b !== 0)).toBe(true);
    const h = host.result?.concat;
    const c = ctrl.result?.concat;
    expect(h && c).toBeTruthy();
    expect(h?.generatedPsk.equals(c?.generatedPsk as Buffer)).toBe(true);
    expect(h?.generatedPsk.length).toBe(32);
    // Concatenation never picks the NULL group (there would be no session key).
    expect(ctrl.result?.dhGroupId).not.toBe(DhGroupId.NULL);
    expect(ctrl.result?.bidirectional).toBe(false);
  });

  it('REPLACETLSPSK with a controller key: bidirectional, SC_C 03h, PSKs agree', () => {
    const { host, ctrl } = pair({ concat: 'replace', ctrlKey }, { concat: 'replace', ctrlKey });
    const { final, sent } = run(host, ctrl);
    expect(final.kind).toBe('done');
    expect((sent[0] as Extract<AuthMessage, { type: 'negotiate' }>).scC).toBe(0x03);
    expect((sent[1] as DhchapReply).seqnum).not.toBe(0);
    expect(host.result?.bidirectional).toBe(true);
    expect(host.result?.concat?.generatedPsk.equals(ctrl.result?.concat?.generatedPsk as Buffer)).toBe(true);
  });

  it('generated PSK = HMAC(H(g^xy), C1 || C2) (Linux 7.x), the same bytes as HMAC(g^xy, C1 || C2) (Linux 6.15..6.x)', () => {
    const secret = Buffer.alloc(256, 0x5a);
    const c1 = Buffer.alloc(32, 1);
    const c2 = Buffer.alloc(32, 2);
    const ks = createHash('sha256').update(secret).digest();
    const r = generatedPsks(HashId.SHA256, secret, c1, c2);
    expect(r.generatedPsk.toString('hex')).toBe(createHmac('sha256', ks).update(Buffer.concat([c1, c2])).digest('hex'));
    expect(r.generatedPsk.toString('hex')).toBe(createHmac('sha256', secret).update(Buffer.concat([c1, c2])).digest('hex'));
  });

  it('SC_C goes into R1 in place of the 00h byte after T_ID', () => {
    const k = Buffer.alloc(32, 9);
    const ch = Buffer.alloc(32, 3);
    const expected = (sc: number): string =>
      createHmac('sha256', k)
        .update(ch)
        .update(Buffer.from([0x78, 0x56, 0x34, 0x12, 0x07, 0x00, sc]))
        .update('HostHost')
        .update(HOSTNQN)
        .update(Buffer.from([0]))
        .update(SUBNQN)
        .digest('hex');
    const base = { hashId: HashId.SHA256, key: k, challenge: ch, seqnum: 0x12345678, transactionId: 7, hostnqn: HOSTNQN, subsysnqn: SUBNQN };
    expect(hostResponse(base).toString('hex')).toBe(expected(0));
    expect(hostResponse({ ...base, scC: ScC.NEWTLSPSK }).toString('hex')).toBe(expected(2));
  });

  const mismatch: Array<[string, Partial<DhchapHostOptions>, Partial<DhchapControllerOptions>, ((m: AuthMessage) => AuthMessage)?]> = [
    ['NEWTLSPSK on a queue that offers none', { concat: 'new' }, {}],
    ['REPLACETLSPSK on a cleartext admin queue', { concat: 'replace' }, { concat: 'new' }],
    ['NEWTLSPSK inside TLS', { concat: 'new' }, { concat: 'replace' }],
    ['NOSC on a queue admitted only for concatenation', {}, { concat: 'new', concatRequired: true }],
    ['only the NULL DH group in common', { concat: 'new', dhGroups: [DhGroupId.NULL] }, { concat: 'new' }],
    ['SC_C 01h (SC), which Linux answers with CONCAT_MISMATCH', {}, { concat: 'new' }, (m) => (m.type === 'negotiate' ? { ...m, scC: 0x01 } : m)],
  ];
  it.each(mismatch)('%s: AUTH_Failure1 CONCAT_MISMATCH', (_n, h, c, tamper) => {
    const { host, ctrl } = pair(h, c);
    const { final } = run(host, ctrl, tamper);
    expect(final.kind).toBe('failed');
    expect(ctrl.error?.explanation).toBe(FailureExplanation.CONCAT_MISMATCH);
    expect(ctrl.result).toBeNull();
  });

  it('a hash no TLS suite takes (SHA-512 only) is HASH_UNUSABLE under concatenation', () => {
    const { host, ctrl } = pair({ concat: 'new', hashes: [HashId.SHA512] }, { concat: 'new', concatHashes: [HashId.SHA256] });
    run(host, ctrl);
    expect(ctrl.error?.explanation).toBe(FailureExplanation.HASH_UNUSABLE);
  });

  it('a concatenated Reply without C2 (CVALID=0) fails: the PSK needs both challenges', () => {
    const { host, ctrl } = pair({ concat: 'new' }, { concat: 'new' });
    run(host, ctrl, (m) => (m.type === 'reply' ? { ...m, cvalid: false, challenge: Buffer.alloc(m.challenge.length) } : m));
    expect(ctrl.error?.explanation).toBe(FailureExplanation.FAILED);
    expect(ctrl.error?.reason).toMatch(/CVALID=0/);
  });
});
