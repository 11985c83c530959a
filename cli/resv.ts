// `nvme-tcp resv-register|resv-acquire|resv-release|resv-report`: nvme-cli's reservation verbs and long flag names
// (NVMe Base 2.0 §7.5-7.8), over one connection made with the connect flags.
import type { Command } from 'commander';
import type { Controller, ResvReport } from '../initiator/index.js';
import { intArg, u64Arg, type CliIo } from './args.js';

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
 * Adds the verb's own flags: nvme-cli's long names; its short letters would clash with the connect flags (-a, -c, -i,
 * -k, -n, -t), which nvme-cli's resv verbs do not have because they act on a device node.
 */
export function addResvOptions(c: Command, verb: ResvVerb): void {
  c.option('--namespace-id <nsid>', 'namespace', (v) => intArg('namespace-id', v, 1, 0xfffffffe), 1);
  if (verb !== 'resv-report') {
    c.option('--crkey <key>', 'current reservation key (default 0)', key('crkey')).option('--iekey', 'ignore existing key');
  }
  if (verb === 'resv-register') {
    c.option('--nrkey <key>', 'new reservation key (default 0)', key('nrkey'))
      .option('--rrega <n>', 'action: 0 register, 1 unregister, 2 replace', small('rrega', 7), 0)
      .option('--cptpl <n>', 'persist through power loss: 0 no change, 2 clear, 3 set', small('cptpl', 3), 0);
  }
  if (verb === 'resv-acquire') {
    c.option('--prkey <key>', 'preempt reservation key (default 0)', key('prkey'))
      .option('--rtype <n>', 'reservation type 1..6', small('rtype', 255), 0)
      .option('--racqa <n>', 'action: 0 acquire, 1 preempt, 2 preempt and abort', small('racqa', 7), 0);
  }
  if (verb === 'resv-release') {
    c.option('--rtype <n>', 'reservation type', small('rtype', 255), 0).option('--rrela <n>', 'action: 0 release, 1 clear', small('rrela', 7), 0);
  }
  if (verb === 'resv-report') {
    c.option('--numd <n>', 'dwords to read, minus one', small('numd', 65535), 1023).option('--eds', 'extended data structure (128-bit host IDs)');
  }
}

/** Runs the verb on controller `c`; resolves to the exit status. */
export async function runResv(verb: ResvVerb, c: Controller, o: ResvOpts, io: CliIo): Promise<number> {
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
      io.stdout(formatReport(await r.report({ eds: o.eds === true, length: (o.numd + 1) * 4 }), o.outputFormat));
      return 0;
  }
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
