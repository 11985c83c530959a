import { execFileSync } from 'node:child_process';
import { checkPrimeSync, createHash, createHmac } from 'node:crypto';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { DhGroupId, FailureExplanation, HashId } from './constants.js';
import { ffdhePrime } from './crypto.js';
import type { FfdheGroupId, RandomBytes } from './crypto.js';
import { DhchapController, DhchapHost } from './dhchap.js';
import type { DhchapControllerOptions, DhchapHostOptions, DhchapHostStep } from './dhchap.js';
import { DhchapKey, generateDhchapKey } from './keys.js';
import { decodeAuthMessage, encodeAuthMessage } from './messages.js';
import type { AuthMessage } from './messages.js';

const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100';
const SUBNQN = 'nqn.2024-01.io.example:auth-subsys';
const HASH_NAMES = { 1: 'sha256', 2: 'sha384', 3: 'sha512' } as const;

/** Deterministic byte source (SHA-512 in counter mode) that records every request. */
function seeded(seed: string): RandomBytes & { calls: Buffer[] } {
  let counter = 0;
  const calls: Buffer[] = [];
  const fn = (n: number): Buffer => {
    const parts: Buffer[] = [];
    let have = 0;
    while (have < n) {
      const b = createHash('sha512').update(`${seed}:${counter++}`).digest();
      parts.push(b);
      have += b.length;
    }
    const out = Buffer.concat(parts).subarray(0, n);
    calls.push(Buffer.from(out));
    return out;
  };
  return Object.assign(fn, { calls });
}

interface Transcript {
  final: DhchapHostStep;
  messages: { dir: 'h2c' | 'c2h'; msg: AuthMessage }[];
}

/** Drive a host session against a controller session the way initiator and target would. */
function run(host: DhchapHost, ctrl: DhchapController): Transcript {
  const messages: Transcript['messages'] = [];
  const log = (dir: 'h2c' | 'c2h', b: Buffer): void => {
    const d = decodeAuthMessage(b);
    if (d.ok) messages.push({ dir, msg: d.message });
  };
  let step = host.next();
  for (let i = 0; i < 16; i++) {
    if (step.kind === 'send') {
      log('h2c', step.payload);
      ctrl.handleSend(step.payload);
      step = host.next();
    } else if (step.kind === 'receive') {
      const r = ctrl.handleReceive(step.allocationLength);
      if (r.kind === 'status') {
        step = { kind: 'failed', error: host.abort(`receive status 0x${r.status.toString(16)}`) };
        break;
      }
      expect(r.payload.length).toBe(step.allocationLength);
      log('c2h', r.payload);
      step = host.next(r.payload);
    } else {
      break;
    }
  }
  return { final: step, messages };
}

function pair(
  h: Partial<DhchapHostOptions> & { hostKey: DhchapKey },
  c: Partial<DhchapControllerOptions> & { hostKey: DhchapKey },
): { host: DhchapHost; ctrl: DhchapController } {
  return {
    host: new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, transactionId: 0x42, ...h }),
    ctrl: new DhchapController({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, ...c }),
  };
}

const hostKey = generateDhchapKey({ hmac: 1, hostnqn: HOSTNQN });
const ctrlKey = generateDhchapKey({ hmac: 3, hostnqn: SUBNQN });

describe('DH-HMAC-CHAP host vs controller', () => {
  const hashes = [HashId.SHA256, HashId.SHA384, HashId.SHA512];
  const groups = [DhGroupId.NULL, DhGroupId.FFDHE2048, DhGroupId.FFDHE3072];
  const cases = hashes.flatMap((hash) => groups.flatMap((group) => [false, true].map((bidi) => ({ hash, group, bidi }))));
  it.each(cases)('hash $hash, DH group $group, bidirectional $bidi', ({ hash, group, bidi }) => {
    const { host, ctrl } = pair(
      { hostKey, ...(bidi ? { ctrlKey } : {}) },
      { hostKey, ctrlKey, hashes: [hash], dhGroups: [group] },
    );
    const t = run(host, ctrl);
    expect(t.final.kind).toBe('done');
    expect(host.state).toBe('authenticated');
    expect(ctrl.state).toBe('authenticated');
    expect(ctrl.authenticated).toBe(true);
    const expected = { hashId: hash, dhGroupId: group, bidirectional: bidi, transactionId: 0x42 };
    expect(host.result).toEqual(expected);
    expect(ctrl.result).toEqual(expected);
    expect(t.messages.map((m) => m.msg.type)).toEqual(
      bidi ? ['negotiate', 'challenge', 'reply', 'success1', 'success2'] : ['negotiate', 'challenge', 'reply', 'success1'],
    );
  });

  it.each([DhGroupId.FFDHE4096, DhGroupId.FFDHE6144, DhGroupId.FFDHE8192])('large DH group %s (bidirectional, SHA-512)', (group) => {
    const { host, ctrl } = pair({ hostKey, ctrlKey }, { hostKey, ctrlKey, hashes: [HashId.SHA512], dhGroups: [group] });
    const t = run(host, ctrl);
    expect(t.final.kind).toBe('done');
    expect(ctrl.authenticated).toBe(true);
    const ch = t.messages.find((m) => m.msg.type === 'challenge')?.msg;
    expect(ch?.type === 'challenge' && ch.dhValue.length).toBe(ffdhePrime(group as FfdheGroupId).length);
  });

  it('the controller picks its own preference among what the host offers (Linux host offers all)', () => {
    const { host, ctrl } = pair(
      { hostKey },
      { hostKey, hashes: [HashId.SHA512, HashId.SHA256], dhGroups: [DhGroupId.FFDHE2048, DhGroupId.NULL] },
    );
    run(host, ctrl);
    expect(ctrl.result).toMatchObject({ hashId: HashId.SHA512, dhGroupId: DhGroupId.FFDHE2048 });
  });

  it('the controller re-authenticates on a new Negotiate and stays authenticated meanwhile', () => {
    const { host, ctrl } = pair({ hostKey }, { hostKey });
    expect(run(host, ctrl).final.kind).toBe('done');
    const again = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, transactionId: 0x43, hostKey, ctrlKey });
    const step = again.next();
    if (step.kind !== 'send') throw new Error('expected send');
    ctrl.handleSend(step.payload);
    expect(ctrl.state).toBe('challenge');
    expect(ctrl.authenticated).toBe(true);
  });
});

describe('DH-HMAC-CHAP failures', () => {
  it('wrong host key: controller answers Failure1 "authentication failed" and is done for', () => {
    const other = generateDhchapKey();
    const { host, ctrl } = pair({ hostKey: other }, { hostKey, dhGroups: [DhGroupId.FFDHE2048] });
    const t = run(host, ctrl);
    expect(t.final.kind).toBe('failed');
    if (t.final.kind !== 'failed') return;
    expect(t.final.error.explanation).toBe(FailureExplanation.FAILED);
    expect(t.final.error.detectedBy).toBe('controller');
    expect(t.messages.at(-1)?.msg).toEqual({ type: 'failure1', tId: 0x42, reasonCode: 1, explanation: 1 });
    expect(ctrl.state).toBe('failed');
    expect(ctrl.authenticated).toBe(false);
  });

  it('wrong controller key: host rejects R2 with Failure2 and the controller ends failed', () => {
    const { host, ctrl } = pair({ hostKey, ctrlKey: generateDhchapKey() }, { hostKey, ctrlKey });
    const t = run(host, ctrl);
    expect(t.final.kind).toBe('failed');
    if (t.final.kind !== 'failed') return;
    expect(t.final.error.detectedBy).toBe('host');
    expect(t.final.error.explanation).toBe(FailureExplanation.FAILED);
    expect(t.messages.at(-1)?.msg).toMatchObject({ type: 'failure2', explanation: FailureExplanation.FAILED });
    expect(ctrl.state).toBe('failed');
    expect(ctrl.error?.detectedBy).toBe('host');
    expect(ctrl.authenticated).toBe(false);
  });

  it('bidirectional requested but the controller has no controller key: Failure1 (nvmet_auth_success1)', () => {
    const { host, ctrl } = pair({ hostKey, ctrlKey }, { hostKey });
    const t = run(host, ctrl);
    expect(t.final.kind === 'failed' && t.final.error.explanation).toBe(FailureExplanation.FAILED);
    expect(ctrl.state).toBe('failed');
  });

  it('no common hash → HASH_UNUSABLE; no common DH group → DHGROUP_UNUSABLE', () => {
    let p = pair({ hostKey, hashes: [HashId.SHA256] }, { hostKey, hashes: [HashId.SHA512] });
    let t = run(p.host, p.ctrl);
    expect(t.final.kind === 'failed' && t.final.error.explanation).toBe(FailureExplanation.HASH_UNUSABLE);
    p = pair({ hostKey, dhGroups: [DhGroupId.NULL] }, { hostKey, dhGroups: [DhGroupId.FFDHE2048] });
    t = run(p.host, p.ctrl);
    expect(t.final.kind === 'failed' && t.final.error.explanation).toBe(FailureExplanation.DHGROUP_UNUSABLE);
  });

  it('controller: secure channel concatenation requested → CONCAT_MISMATCH', () => {
    const ctrl = new DhchapController({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey });
    ctrl.handleSend(encodeAuthMessage({ type: 'negotiate', tId: 1, scC: 1, protocols: [{ authId: 1, hashIds: [1], dhGroupIds: [0] }] }));
    const r = ctrl.handleReceive(4096);
    expect(r.kind === 'data' && decodeAuthMessage(r.payload)).toMatchObject({ message: { type: 'failure1', explanation: FailureExplanation.CONCAT_MISMATCH } });
  });

  it('controller: Reply with the wrong transaction id → INCORRECT_PAYLOAD; out-of-order message → INCORRECT_MESSAGE', () => {
    const mk = (): DhchapController => {
      const c = new DhchapController({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey });
      c.handleSend(encodeAuthMessage({ type: 'negotiate', tId: 5, scC: 0, protocols: [{ authId: 1, hashIds: [1], dhGroupIds: [0] }] }));
      return c;
    };
    let c = mk();
    c.handleReceive(4096);
    c.handleSend(
      encodeAuthMessage({ type: 'reply', tId: 6, cvalid: false, seqnum: 0, response: Buffer.alloc(32), challenge: Buffer.alloc(32), dhValue: Buffer.alloc(0) }),
    );
    let r = c.handleReceive(4096);
    expect(r.kind === 'data' && decodeAuthMessage(r.payload)).toMatchObject({ message: { type: 'failure1', tId: 5, explanation: FailureExplanation.INCORRECT_PAYLOAD } });
    c = mk();
    c.handleSend(encodeAuthMessage({ type: 'success2', tId: 5 }));
    r = c.handleReceive(4096);
    expect(r.kind === 'data' && decodeAuthMessage(r.payload)).toMatchObject({ message: { type: 'failure1', explanation: FailureExplanation.INCORRECT_MESSAGE } });
    expect(c.state).toBe('failed');
  });

  it('controller: too small AL for the Challenge → Internal Error, state unchanged (nvmet)', () => {
    const c = new DhchapController({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey, dhGroups: [DhGroupId.FFDHE2048] });
    c.handleSend(encodeAuthMessage({ type: 'negotiate', tId: 5, scC: 0, protocols: [{ authId: 1, hashIds: [1], dhGroupIds: [1] }] }));
    expect(c.handleReceive(100)).toEqual({ kind: 'status', status: 0x06 });
    expect(c.state).toBe('challenge');
    expect(c.handleReceive(16 + 32 + 256)).toMatchObject({ kind: 'data' });
  });

  function challengeFor(host: DhchapHost, patch: Partial<Extract<AuthMessage, { type: 'challenge' }>>): DhchapHostStep {
    host.next();
    host.next();
    return host.next(
      encodeAuthMessage({
        type: 'challenge',
        tId: 0x42,
        hashId: 1,
        dhGroupId: 0,
        seqnum: 1,
        challenge: Buffer.alloc(32, 1),
        dhValue: Buffer.alloc(0),
        ...patch,
      }),
    );
  }

  it.each([
    ['a hash the host did not offer', { hashId: 3, challenge: Buffer.alloc(64) }, FailureExplanation.HASH_UNUSABLE],
    ['HL not matching the hash', { challenge: Buffer.alloc(48) }, FailureExplanation.HASH_UNUSABLE],
    ['an unknown DH group', { dhGroupId: 9 }, FailureExplanation.DHGROUP_UNUSABLE],
    ['a DH value with the NULL group', { dhValue: Buffer.alloc(256, 1) }, FailureExplanation.INCORRECT_PAYLOAD],
    ['ffdhe2048 without a DH value', { dhGroupId: 1 }, FailureExplanation.DHGROUP_UNUSABLE],
    ['an invalid DH value (1)', { dhGroupId: 1, dhValue: Buffer.from([1]) }, FailureExplanation.INCORRECT_PAYLOAD],
  ])('host answers a challenge with %s with Failure2', (_n, patch, explanation) => {
    const host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, transactionId: 0x42, hostKey, hashes: [1, 2] });
    const step = challengeFor(host, patch);
    expect(step.kind).toBe('send');
    if (step.kind !== 'send') return;
    expect(decodeAuthMessage(step.payload)).toEqual({ ok: true, message: { type: 'failure2', tId: 0x42, reasonCode: 1, explanation } });
    expect(host.next()).toMatchObject({ kind: 'failed' });
    expect(host.error?.explanation).toBe(explanation);
  });

  it('host: wrong transaction id or message type fails without Failure2 (nvme_auth_receive_validate)', () => {
    let host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, transactionId: 0x42, hostKey });
    expect(challengeFor(host, { tId: 0x41 })).toMatchObject({ kind: 'failed', error: { explanation: FailureExplanation.INCORRECT_MESSAGE } });
    host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, transactionId: 0x42, hostKey });
    host.next();
    host.next();
    expect(host.next(encodeAuthMessage({ type: 'success2', tId: 0x42 }))).toMatchObject({ kind: 'failed' });
  });

  it('errors and sessions never expose key material', () => {
    const { host, ctrl } = pair({ hostKey: generateDhchapKey() }, { hostKey, dhGroups: [DhGroupId.FFDHE2048] });
    const t = run(host, ctrl);
    const secret = hostKey.format().split(':')[2] as string;
    const texts = [t.final.kind === 'failed' ? t.final.error.message : '', inspect(host), inspect(ctrl), inspect(ctrl.error), JSON.stringify(ctrl.error)];
    for (const s of texts) expect(s).not.toContain(secret.slice(0, 16));
    expect(inspect(ctrl)).toBe("DhchapController { state: 'failed', authenticated: false }");
  });
});

// ---- known answers computed by an independent, straightforward implementation ----

function modPow(b: bigint, e: bigint, m: bigint): bigint {
  let r = 1n;
  b %= m;
  while (e > 0n) {
    if (e & 1n) r = (r * b) % m;
    e >>= 1n;
    b = (b * b) % m;
  }
  return r;
}
const big = (b: Buffer): bigint => BigInt(`0x${b.toString('hex') || '0'}`);
const bytesOf = (x: bigint, len: number): Buffer => Buffer.from(x.toString(16).padStart(len * 2, '0'), 'hex');

describe('known-answer check against an independent computation (Linux formulas)', () => {
  it('ffdhe2048 + SHA-384, bidirectional: public values, session key, R1 and R2', () => {
    const hk = new DhchapKey(2, Buffer.alloc(48, 0x11));
    const ck = new DhchapKey(1, Buffer.alloc(32, 0x22));
    const hostRand = seeded('host');
    const ctrlRand = seeded('ctrl');
    const host = new DhchapHost({
      hostnqn: HOSTNQN,
      subsysnqn: SUBNQN,
      transactionId: 0x1234,
      hostKey: hk,
      ctrlKey: ck,
      randomBytes: hostRand,
      nextSeqnum: () => 0x0a0b0c0d,
    });
    const ctrl = new DhchapController({
      hostnqn: HOSTNQN,
      subsysnqn: SUBNQN,
      hostKey: hk,
      ctrlKey: ck,
      hashes: [HashId.SHA384],
      dhGroups: [DhGroupId.FFDHE2048],
      randomBytes: ctrlRand,
      nextSeqnum: () => 0x01020304,
    });
    const t = run(host, ctrl);
    expect(t.final.kind).toBe('done');
    const ch = t.messages.find((m) => m.msg.type === 'challenge')?.msg as Extract<AuthMessage, { type: 'challenge' }>;
    const rep = t.messages.find((m) => m.msg.type === 'reply')?.msg as Extract<AuthMessage, { type: 'reply' }>;
    const s1 = t.messages.find((m) => m.msg.type === 'success1')?.msg as Extract<AuthMessage, { type: 'success1' }>;
    expect(ch.seqnum).toBe(0x01020304);
    expect(rep.seqnum).toBe(0x0a0b0c0d);
    expect(rep.cvalid).toBe(true);

    const p = ffdhePrime(DhGroupId.FFDHE2048);
    const P = big(p);
    // The private exponents are the 29-byte draws; the challenges the 48-byte ones.
    const x = big(ctrlRand.calls.find((c) => c.length === 29) as Buffer);
    const y = big(hostRand.calls.find((c) => c.length === 29) as Buffer);
    expect(ch.challenge.equals(ctrlRand.calls.find((c) => c.length === 48) as Buffer)).toBe(true);
    expect(rep.challenge.equals(hostRand.calls.find((c) => c.length === 48) as Buffer)).toBe(true);
    expect(ch.dhValue.equals(bytesOf(modPow(2n, x, P), 256))).toBe(true);
    expect(rep.dhValue.equals(bytesOf(modPow(2n, y, P), 256))).toBe(true);
    const sessionKey = bytesOf(modPow(big(rep.dhValue), x, P), 256);
    expect(sessionKey.equals(bytesOf(modPow(big(ch.dhValue), y, P), 256))).toBe(true);

    const alg = HASH_NAMES[HashId.SHA384];
    const hashedSk = createHash(alg).update(sessionKey).digest();
    const ca1 = createHmac(alg, hashedSk).update(ch.challenge).digest();
    const ca2 = createHmac(alg, hashedSk).update(rep.challenge).digest();
    // Kh' = HMAC-SHA384(key, hostnqn || "NVMe-over-Fabrics") because the host key has hh 02.
    const khT = createHmac('sha384', Buffer.alloc(48, 0x11)).update(HOSTNQN + 'NVMe-over-Fabrics').digest();
    const kcT = createHmac('sha256', Buffer.alloc(32, 0x22)).update(SUBNQN + 'NVMe-over-Fabrics').digest();
    const r1 = createHmac(alg, khT)
      .update(Buffer.concat([ca1, Buffer.from('04030201', 'hex'), Buffer.from('3412', 'hex'), Buffer.from([0])]))
      .update(`HostHost${HOSTNQN}\0${SUBNQN}`)
      .digest();
    const r2 = createHmac(alg, kcT)
      .update(Buffer.concat([ca2, Buffer.from('0d0c0b0a', 'hex'), Buffer.from('3412', 'hex'), Buffer.from([0])]))
      .update(`Controller${SUBNQN}\0${HOSTNQN}`)
      .digest();
    expect(rep.response.toString('hex')).toBe(r1.toString('hex'));
    expect(s1.response?.toString('hex')).toBe(r2.toString('hex'));
  });

  it('NULL group + SHA-256, unidirectional: R1 uses the raw challenge and an untransformed hh 00 key', () => {
    const raw = Buffer.alloc(32, 0x5a);
    const hk = new DhchapKey(0, raw);
    const host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, transactionId: 0, hostKey: hk });
    host.next();
    host.next();
    const c1 = Buffer.alloc(32, 0x33);
    const step = host.next(
      encodeAuthMessage({ type: 'challenge', tId: 0, hashId: 1, dhGroupId: 0, seqnum: 0xdeadbeef, challenge: c1, dhValue: Buffer.alloc(0) }),
    );
    if (step.kind !== 'send') throw new Error('expected reply');
    const d = decodeAuthMessage(step.payload);
    if (!d.ok || d.message.type !== 'reply') throw new Error('expected reply');
    const expected = createHmac('sha256', raw)
      .update(Buffer.concat([c1, Buffer.from('efbeadde0000', 'hex'), Buffer.from([0])]))
      .update(`HostHost${HOSTNQN}\0${SUBNQN}`)
      .digest();
    expect(d.message.response.equals(expected)).toBe(true);
    expect(d.message).toMatchObject({ cvalid: false, seqnum: 0, dhValue: Buffer.alloc(0), challenge: Buffer.alloc(32) });
  });
});

describe('embedded RFC 7919 primes', () => {
  const groups = [DhGroupId.FFDHE2048, DhGroupId.FFDHE3072, DhGroupId.FFDHE4096, DhGroupId.FFDHE6144, DhGroupId.FFDHE8192] as const;

  it('have the RFC 7919 shape (64 leading and trailing one bits, e-digits prefix) and the right sizes', () => {
    groups.forEach((g, i) => {
      const p = ffdhePrime(g);
      expect(p.length).toBe([256, 384, 512, 768, 1024][i]);
      expect(p.subarray(0, 8).equals(Buffer.alloc(8, 0xff))).toBe(true);
      expect(p.subarray(-8).equals(Buffer.alloc(8, 0xff))).toBe(true);
      // Every group starts with the same 2^(b-130)·e bits: ADF85458A2BB4A9A...
      expect(p.subarray(8, 16).toString('hex')).toBe('adf85458a2bb4a9a');
    });
    expect(checkPrimeSync(ffdhePrime(DhGroupId.FFDHE2048), { checks: 4 })).toBe(true);
  });

  let opensslOk = false;
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    opensslOk = true;
  } catch {
    opensslOk = false;
  }
  it.skipIf(!opensslOk)('match OpenSSL\'s built-in ffdhe groups', () => {
    groups.forEach((g, i) => {
      const bits = [2048, 3072, 4096, 6144, 8192][i] as number;
      const text = execFileSync('openssl', ['genpkey', '-genparam', '-algorithm', 'DH', '-pkeyopt', `group:ffdhe${bits}`, '-text'], {
        encoding: 'utf8',
      });
      const m = /P:\s*([\s\S]*?)\n\s*G:/.exec(text) ?? /prime:\s*([\s\S]*?)\n\s*generator:/.exec(text);
      let primeHex = m ? (m[1] as string).replace(/[\s:]/g, '') : '';
      if (!primeHex) {
        // OpenSSL 3 prints only "GROUP: ffdheN" with -text; decode the PEM instead.
        const b64 = text.split('\n').filter((l) => l && !l.startsWith('-----') && !l.includes(':')).join('');
        const der = Buffer.from(b64, 'base64');
        let o = 2;
        if ((der[1] as number) & 0x80) o = 2 + ((der[1] as number) & 0x7f);
        o += 1; // INTEGER tag
        let len = der[o] as number;
        o += 1;
        if (len & 0x80) {
          const n = len & 0x7f;
          len = der.readUIntBE(o, n);
          o += n;
        }
        primeHex = der.subarray(o, o + len).toString('hex');
      }
      expect(primeHex.replace(/^00/, '')).toBe(ffdhePrime(g).toString('hex'));
    });
  });
});
