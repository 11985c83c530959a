// `nvme-tcp resv-register|resv-acquire|resv-release|resv-report`: nvme-cli's reservation verbs with its flags and short
// letters (NVMe Base 2.0 §7.5-7.8), over one connection made with the connect flags.
import type { Command } from 'commander';
import { NvmeStatusError, type Controller, type ResvReport } from '../initiator/index.js';
import { Ctratt, Status } from '../protocol/index.js';
import { intArg, u64Arg, type CliIo } from './args.js';
import type { HostIdentity } from './host-identity.js';

export type ResvVerb = 'resv-register' | 'resv-acquire' | 'resv-release' | 'resv-report';

export interface ResvOpts {
  namespaceId: number;
  crkey?: bigint;
  nrkey?: bigint;
  prkey?: bigint;
  rtype: number;
  racqa: number;
  rrega: number;
  rrela: number;
  cptpl: number;
  iekey?: boolean;
  numd: number;
  eds?: boolean;
  outputFormat: 'normal' | 'json';
}

const small = (flag: string, max: number) => (v: string) => intArg(flag, v, 0, max);
const key = (flag: string) => (v: string) => u64Arg(flag, v);

/**
 * Short letters nvme-cli 2.x gives its resv verbs (-n namespace, -c crkey, -k nrkey, -p prkey/cptpl, -t rtype,
 * -a racqa/rrela, -r rrega, -i iekey, -d numd, -e eds). The connect flags with these letters (-a traddr, -n nqn,
 * -t transport, -c reconnect-delay, -k keep-alive-tmo, -i nr-io-queues) are long-only in every resv verb, so a line
 * written for nvme-cli means the same here and one verb's letters are every resv verb's.
 */
export const RESV_SHORT = ['a', 'c', 'd', 'e', 'i', 'k', 'n', 'p', 'r', 't'] as const;

/** Adds the verb's own flags with nvme-cli's long names and short letters. */
export function addResvOptions(c: Command, verb: ResvVerb): void {
  c.option('-n, --namespace-id <nsid>', 'namespace', (v) => intArg('namespace-id', v, 1, 0xfffffffe), 1);
  if (verb !== 'resv-report') {
    c.option('-c, --crkey <key>', 'current reservation key (default 0)', key('crkey')).option('-i, --iekey', 'ignore existing key');
  }
  if (verb === 'resv-register') {
    c.option('-k, --nrkey <key>', 'new reservation key (default 0)', key('nrkey'))
      .option('-r, --rrega <n>', 'action: 0 register, 1 unregister, 2 replace', small('rrega', 7), 0)
      .option('-p, --cptpl <n>', 'persist through power loss: 0 no change, 2 clear, 3 set', small('cptpl', 3), 0);
  }
  if (verb === 'resv-acquire') {
    c.option('-p, --prkey <key>', 'preempt reservation key (default 0)', key('prkey'))
      .option('-t, --rtype <n>', 'reservation type 1..6', small('rtype', 255), 0)
      .option('-a, --racqa <n>', 'action: 0 acquire, 1 preempt, 2 preempt and abort', small('racqa', 7), 0);
  }
  if (verb === 'resv-release') {
    c.option('-t, --rtype <n>', 'reservation type', small('rtype', 255), 0).option('-a, --rrela <n>', 'action: 0 release, 1 clear', small('rrela', 7), 0);
  }
  if (verb === 'resv-report') {
    c.option('-d, --numd <n>', 'dwords to read, minus one', small('numd', 65535), 1023).option(
      '-e, --eds',
      'extended data structure (128-bit host IDs); on by itself when the controller reports 128-bit host IDs, as nvme-cli does',
    );
  }
}

/**
 * Runs the verb on controller `c` as host `id`; resolves to the exit status. A RESERVATION_CONFLICT or
 * HOST_ID_INCONSIST gets its one line here, with what the user can change.
 */
export async function runResv(verb: ResvVerb, c: Controller, o: ResvOpts, io: CliIo, id: HostIdentity): Promise<number> {
  // nvme-cli's resv-report sets EDS itself when Identify Controller CTRATT reports 128-bit host IDs (HIDS, bit 0).
  const eds = o.eds === true || (c.identify.ctratt & Ctratt.HOST_ID_128) !== 0;
  try {
    return await runVerb(verb, c, o, io, eds);
  } catch (err) {
    const hint = err instanceof NvmeStatusError ? resvHint(verb, err, id, eds) : undefined;
    if (hint === undefined || !(err instanceof NvmeStatusError)) throw err;
    io.stderr(`nvme-tcp ${verb}: ${err.message} [${err.code}]; ${hint}\n`);
    return 1;
  }
}

async function runVerb(verb: ResvVerb, c: Controller, o: ResvOpts, io: CliIo, eds: boolean): Promise<number> {
  const r = c.namespace(o.namespaceId).reservation;
  const iekey = o.iekey === true;
  const done = (what: string): number => {
    io.stdout(o.outputFormat === 'json' ? `${JSON.stringify({ result: 'success', command: verb, nsid: o.namespaceId })}\n` : `NVME Reservation ${what} success\n`);
    return 0;
  };
  switch (verb) {
    case 'resv-register':
      await r.register({ crkey: o.crkey ?? 0n, nrkey: o.nrkey ?? 0n, rrega: o.rrega, iekey, cptpl: o.cptpl });
      return done('');
    case 'resv-acquire':
      await r.acquire({ crkey: o.crkey ?? 0n, prkey: o.prkey ?? 0n, rtype: o.rtype, racqa: o.racqa, iekey });
      return done('Acquire');
    case 'resv-release':
      await r.release({ crkey: o.crkey ?? 0n, rtype: o.rtype, rrela: o.rrela, iekey });
      return done('Release');
    case 'resv-report':
      io.stdout(formatReport(await r.report({ eds, length: (o.numd + 1) * 4 }), o.outputFormat));
      return 0;
  }
}

/** What to change after a reservation status, or undefined when the status says nothing the user can act on. */
export function resvHint(verb: ResvVerb, err: NvmeStatusError, id: HostIdentity, eds: boolean): string | undefined {
  const sc = err.status & 0x7ff;
  if (sc === Status.RESERVATION_CONFLICT) {
    const who = `the target knows this host by host ID ${id.hostid} (${id.source.hostid === 'flag' ? '-I' : id.source.hostid})`;
    // A registrant is a host identifier, not a host NQN (NVMe Base 2.0 §8.19.1): -q alone keeps the file's host ID.
    if (id.source.hostid !== 'flag') return `${who}; host NQNs that share a host ID are one registrant, so give each host its own with -I UUID`;
    return `${who}; another registrant holds the reservation, or the key given is not this host's (resv-report lists them)`;
  }
  if (sc === Status.HOST_ID_INCONSIST && verb === 'resv-report' && !eds) {
    // NVMe-oF host identifiers are 128-bit (the Connect HOSTID), and a Reservation Report without EDS can only carry
    // 64-bit ones (NVMe Base 2.0 §7.8): nvmet and this target answer it with Host Identifier Inconsistent Format.
    return 'the controller uses 128-bit host IDs, which only the extended data structure carries: add -e/--eds, as nvme-cli does';
  }
  return undefined;
}

/** nvme-cli's resv-report layout; JSON with the same facts (keys in hex in both). */
function formatReport(rep: ResvReport, fmt: 'normal' | 'json'): string {
  if (fmt === 'json') {
    const regctlext = rep.regctls.map((x) => ({ cntlid: x.cntlid, rcsts: x.holder ? 1 : 0, rkey: `0x${x.rkey.toString(16)}`, hostid: x.hostid.toString('hex') }));
    return `${JSON.stringify({ gen: rep.gen, rtype: rep.rtype, regctl: rep.regctlCount, ptpls: rep.ptpls ? 1 : 0, regctlext }, null, 2)}\n`;
  }
  const lines = ['NVME Reservation status:', '', `gen       : ${rep.gen}`, `rtype     : ${rep.rtype}`, `regctl    : ${rep.regctlCount}`, `ptpls     : ${rep.ptpls ? 1 : 0}`, ''];
  rep.regctls.forEach((x, i) => lines.push(`regctlext[${i}] :`, `  cntlid  : ${x.cntlid.toString(16)}`, `  rcsts   : ${x.holder ? 1 : 0}`, `  rkey    : ${x.rkey.toString(16)}`, `  hostid  : ${x.hostid.toString('hex')}`, ''));
  return `${lines.join('\n')}\n`;
}
