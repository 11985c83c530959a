// The fault rule language (docs/faults.md): a rule is a match, a schedule and an action, validated here for the
// rules file (`nvme-tcp target --faults FILE`), the HTTP API and `target ctl faults add`.
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { errnoText } from './load.js';
import { ANA_STATE_NAMES, Status, } from '../../protocol/index.js';
import { ConfigError, bool, int, list, obj, opt, parseWith, show, str } from './schema.js';
import { FAULT_COMMAND_SETS, FAULT_EVENTS, FAULT_WIRE_ACTIONS, type FaultRule } from '../model/faults.js';

export { FAULT_COMMAND_SETS, FAULT_EVENTS, FAULT_WIRE_ACTIONS };
export type { FaultAction, FaultAnaState, FaultCommandSet, FaultEvent, FaultMatch, FaultRule, FaultSchedule, FaultWireAction } from '../model/faults.js';

/** PDU types a rule can match: ICReq (00h), CapsuleCmd (04h) and H2CData (06h), the host's PDUs that start work (NVMe-TCP 1.0 §3.6.2). */
const PDU_TYPES_MATCHED = [0x00, 0x04, 0x06];

const NVME_STATUS_NAMES = Object.keys(Status);

/** A status as a number (Linux 15-bit form: SCT << 8 | SC) or a protocol Status name ("ANA_INACCESSIBLE"). */
const statusValue = z.union([int(1, 0x7ff, 'a status (SCT << 8 | SC)'), str('a status').refine((v) => NVME_STATUS_NAMES.includes(v), { error: (iss) => `${show(iss.input)} is not a status name; use a number or one of ANA_INACCESSIBLE, NS_NOT_READY, READ_ERROR, ...` })]);

const qidMatch = z.union([int(0, 65535, 'a queue id'), list(int(0, 65535, 'a queue id')), z.enum(['admin', 'io'], { error: (iss) => `${show(iss.input)} is not a queue; use a qid, a list of qids, "admin" or "io"` })]);

const matchSchema = obj({
  port: opt(int(0, 65535, 'a port id')),
  hostnqn: opt(str('a host NQN')),
  subnqn: opt(str('a subsystem NQN')),
  cntlid: opt(int(0, 0xffff, 'a controller ID')),
  qid: opt(qidMatch),
  event: opt(z.enum(FAULT_EVENTS, { error: (iss) => `${show(iss.input)} is not an event; use one of ${FAULT_EVENTS.join(', ')}` })),
  set: opt(z.enum(FAULT_COMMAND_SETS, { error: (iss) => `${show(iss.input)} is not a command set; use fabrics, admin or io` })),
  opcode: opt(z.union([int(0, 255, 'an opcode'), list(int(0, 255, 'an opcode'))])),
  fctype: opt(int(0, 255, 'a Fabrics command type')),
  nsid: opt(int(1, 0xffffffff, 'a namespace ID')),
  lba: opt(obj({ start: int(0, Number.MAX_SAFE_INTEGER, 'an LBA'), count: int(1, Number.MAX_SAFE_INTEGER, 'a block count') })),
  pduType: opt(
    int(0, 255, 'a PDU type').refine((v) => PDU_TYPES_MATCHED.includes(v), {
      error: (iss) => `PDU type ${show(iss.input)} cannot be matched; use 0 (ICReq), 4 (CapsuleCmd) or 6 (H2CData)`,
    }),
  ),
});

const scheduleSchema = obj({
  /** Fire on the Nth match only (with `every`: from the Nth on). */
  nth: opt(int(1, 0x7fffffff, 'a match number')),
  /** Fire on every Kth match. */
  every: opt(int(1, 0x7fffffff, 'a match interval')),
  /** Fire with this probability, drawn from a PRNG seeded with `seed` (the same seed replays the same run). */
  probability: opt(z.number({ error: (iss) => `expected a number, got ${show(iss.input)}; use a probability in 0..1` }).min(0, { error: 'is below 0; use a probability in 0..1' }).max(1, { error: 'is above 1; use a probability in 0..1' })),
  seed: opt(int(0, 0xffffffff, 'a 32-bit seed')),
  /** Time window, from when the rule was added: matches before afterMs or after afterMs + forMs do not count. */
  afterMs: opt(int(0, 0x7fffffff, 'milliseconds')),
  forMs: opt(int(1, 0x7fffffff, 'milliseconds')),
  /** Stop firing after this many firings. */
  times: opt(int(1, 0x7fffffff, 'a firing count')),
});

const actionSchema = z.discriminatedUnion(
  'kind',
  [
    obj({ kind: z.literal('status'), status: statusValue, dnr: opt(bool), more: opt(bool), crd: opt(int(0, 3, 'a CRD index')) }),
    obj({ kind: z.literal('delay'), us: opt(int(0, 2 ** 42, 'microseconds')), minUs: opt(int(0, 2 ** 42, 'microseconds')), maxUs: opt(int(0, 2 ** 42, 'microseconds')) }),
    obj({ kind: z.literal('drop') }),
    obj({ kind: z.literal('duplicate') }),
    obj({ kind: z.literal('cid'), cid: z.union([z.enum(['stale', 'unknown'], { error: (iss) => `${show(iss.input)} is not a CID; use "stale", "unknown" or a number` }), int(0, 0xffff, 'a CID')]) }),
    obj({ kind: z.literal('media-error'), dnr: opt(bool) }),
    obj({ kind: z.literal('grant-queues'), count: int(1, 65535, 'a queue count') }),
    obj({ kind: z.literal('ana'), group: int(1, 128, 'an ANA group'), state: z.enum(ANA_STATE_NAMES, { error: (iss) => `${show(iss.input)} is not an ANA state; use one of ${ANA_STATE_NAMES.join(', ')}` }), aen: opt(bool) }),
    obj({ kind: z.literal('aen'), event: z.enum(['ana', 'ns', 'disc'], { error: (iss) => `${show(iss.input)} is not an event; use ana, ns or disc` }), count: opt(int(1, 10_000, 'an event count')) }),
    obj({ kind: z.literal('fatal') }),
    obj({
      kind: z.literal('icresp'),
      delayMs: opt(int(0, 0x7fffffff, 'milliseconds')),
      never: opt(bool),
      maxh2cdata: opt(int(4096, 0xffffffff, 'a MAXH2CDATA (at least 4096, NVMe-TCP 1.0 §3.6.2.3)')),
      cpda: opt(int(0, 31, 'a CPDA')),
      hdgst: opt(bool),
      ddgst: opt(bool),
    }),
    obj({ kind: z.literal('close'), rst: opt(bool) }),
    obj({ kind: z.literal('c2h-reorder'), size: opt(int(1, 0x7fffffff, 'a C2HData size in bytes')) }),
    obj({ kind: z.literal('c2h-duplicate'), size: opt(int(1, 0x7fffffff, 'a C2HData size in bytes')) }),
    obj({ kind: z.literal('c2h-overrun'), bytes: opt(int(1, 1 << 20, 'a byte count')) }),
    obj({ kind: z.literal('c2h-split'), size: opt(int(1, 0x7fffffff, 'a C2HData size in bytes')) }),
    obj({ kind: z.literal('success-flag'), resp: opt(bool) }),
    obj({ kind: z.literal('c2h-term-req'), fes: int(0, 255, 'a FES (NVMe-TCP 1.0 §3.6.2.5, Figure 25: 1..6)'), fei: opt(int(0, 0xffffffff, 'a FEI')) }),
    obj({ kind: z.literal('header-digest-error') }),
    obj({ kind: z.literal('data-digest-error') }),
    obj({ kind: z.literal('r2t-past-maxr2t'), count: opt(int(2, 64, 'an R2T count')) }),
    obj({ kind: z.literal('r2t-past-transfer'), bytes: opt(int(1, 1 << 20, 'a byte count')) }),
    obj({ kind: z.literal('stall'), afterBytes: opt(int(0, 0x7fffffff, 'a byte count')), ms: opt(int(0, 0x7fffffff, 'milliseconds')) }),
    obj({ kind: z.literal('drip'), bytes: opt(int(1, 65536, 'a byte count')), intervalMs: opt(int(0, 60_000, 'milliseconds')) }),
  ],
  {
    error: (iss) => {
      const k = (iss.input as { kind?: unknown } | undefined)?.kind;
      return `${show(k)} is not an action; use status, delay, drop, duplicate, cid, media-error, grant-queues, ana, aen, fatal, icresp, close or ${FAULT_WIRE_ACTIONS.join(', ')}`;
    },
  },
);

export const faultRuleSchema = obj({
  id: opt(str('a rule id').regex(/^[A-Za-z0-9_.:@-]{1,64}$/, { error: (iss) => `${show(iss.input)} is not a rule id; use 1..64 letters, digits or _.:@-` })),
  match: opt(matchSchema),
  schedule: opt(scheduleSchema),
  action: actionSchema,
}).check(
  z.superRefine((r, ctx) => {
    const m = r.match ?? {};
    const a = r.action;
    const problem = (path: PropertyKey[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    if (a.kind === 'icresp' && m.event !== 'icreq') problem(['match', 'event'], 'an icresp action needs match.event "icreq"');
    if (m.event === 'icreq' && a.kind !== 'icresp' && a.kind !== 'close') problem(['action', 'kind'], `${JSON.stringify(a.kind)} cannot act on an ICReq; use icresp or close`);
    if (m.event === 'icreq') {
      for (const k of ['hostnqn', 'subnqn', 'cntlid', 'qid', 'set', 'opcode', 'fctype', 'nsid', 'lba'] as const) if (m[k] !== undefined) problem(['match', k], `is not known at ICReq time; match ICReq by port only`);
    }
    if (m.pduType === 0 && m.event !== 'icreq') problem(['match', 'pduType'], 'PDU type 0 (ICReq) needs match.event "icreq"');
    if (m.pduType === 6 && m.event !== 'pdu') problem(['match', 'pduType'], 'PDU type 6 (H2CData) needs match.event "pdu"');
    if (m.event === 'pdu' && a.kind !== 'close') problem(['action', 'kind'], `${JSON.stringify(a.kind)} cannot act on a received PDU; use close (at the Nth PDU)`);
    if (m.event === 'pdu') {
      for (const k of ['set', 'opcode', 'fctype', 'nsid', 'lba'] as const) if (m[k] !== undefined) problem(['match', k], 'a PDU event matches by connection (port, qid, hostnqn, subnqn, cntlid) and pduType; drop this field');
    }
    if (a.kind === 'media-error' && (m.nsid === undefined || m.lba === undefined)) problem(['match', m.nsid === undefined ? 'nsid' : 'lba'], 'a media-error action needs match.nsid and match.lba (the bad range)');
    if (a.kind === 'delay' && (a.us === undefined) === (a.minUs === undefined || a.maxUs === undefined)) problem(['action', 'us'], 'give either us, or minUs and maxUs');
    if (a.kind === 'delay' && a.minUs !== undefined && a.maxUs !== undefined && a.minUs > a.maxUs) problem(['action', 'minUs'], `${a.minUs} is above maxUs ${a.maxUs}`);
    if (r.schedule?.seed !== undefined && r.schedule.probability === undefined) problem(['schedule', 'seed'], 'a seed needs a probability');
  }),
);

export type FaultRuleInput = z.input<typeof faultRuleSchema>;
// The schema validates into the model's vocabulary (target/model/faults.ts): an output the model cannot hold fails here.
const schemaMatchesModel: z.ZodType<FaultRule> = faultRuleSchema;
void schemaMatchesModel;

/** A rules file: a list of rules, or `{ "rules": [...] }`. */
export const faultRulesFileSchema = z.union([list(faultRuleSchema), obj({ rules: list(faultRuleSchema) }).transform((f) => f.rules)]);

/** One rule from JSON (the API body, `ctl faults add`); throws ConfigError naming the field. */
export function parseFaultRule(input: unknown, where = 'rule'): FaultRule {
  return parseWith(faultRuleSchema, input, where);
}

/** A rules file's content; throws ConfigError naming the field. */
export function parseFaultRules(input: unknown, where = 'faults'): FaultRule[] {
  return parseWith(faultRulesFileSchema, input, where);
}

/** Reads and validates a rules file (`nvme-tcp target --faults FILE`); throws one ConfigError line naming the field. */
export async function loadFaultRules(path: string): Promise<FaultRule[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`--faults: cannot read ${path} (${errnoText(err)}); check the path`, '', { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`--faults ${path}: not valid JSON (${err instanceof Error ? err.message : String(err)}); fix the syntax`, '', { cause: err });
  }
  return parseFaultRules(json, `--faults ${path}`);
}
