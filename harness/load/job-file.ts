// Job files: the fio subset we run (`[global]` + `[job]` sections of key=value) and the same options as JSON.
// Parsing checks keys and value syntax (with line numbers); resolveJobs applies the namespace geometry.
import { parseDuration, parseSize } from '../../protocol/values/index.js';
import type { BsSplitEntry, JobSpec, RwMode } from './types.js';
import { RW_MODES } from './types.js';

/** A job-file error with a stable code; `line` is 1-based when it comes from an fio file. */
export class JobFileError extends Error {
  readonly code = 'HARNESS_ERR_JOB_FILE';
  constructor(
    message: string,
    readonly line?: number,
  ) {
    super(line === undefined ? message : `line ${line}: ${message}`);
    this.name = 'JobFileError';
  }
}

/** Option values as written (strings from fio files; strings, numbers or booleans from JSON). */
export type RawOptions = Record<string, string>;

export interface ParsedJobFile {
  global: RawOptions;
  jobs: { name: string; options: RawOptions }[];
  /** fio options accepted but without effect here (direct, group_reporting, ...). */
  ignored: string[];
}

/** Options that change nothing for an NVMe/TCP initiator but appear in most fio files. */
const IGNORED = new Set([
  'direct',
  'group_reporting',
  'thread',
  'norandommap',
  'randrepeat',
  'lat_percentiles',
  'clat_percentiles',
  'percentile_list',
  'invalidate',
  'description',
  'buffered',
  'iodepth_batch',
  'iodepth_batch_complete',
  'log_avg_msec',
  'verify_fatal',
]);

/** Aliases fio accepts for the same option. */
const ALIASES: Readonly<Record<string, string>> = {
  readwrite: 'rw',
  blocksize: 'bs',
  wait_for_previous: 'stonewall',
};

type Kind = 'rw' | 'percent' | 'bytes' | 'bytesOrPercent' | 'bssplit' | 'int' | 'time' | 'flag' | 'verify' | 'name' | 'cpus';
const OPTIONS: Readonly<Record<string, Kind>> = {
  rw: 'rw',
  rwmixread: 'percent',
  rwmixwrite: 'percent',
  bs: 'bytes',
  bssplit: 'bssplit',
  iodepth: 'int',
  numjobs: 'int',
  runtime: 'time',
  time_based: 'flag',
  size: 'bytesOrPercent',
  io_size: 'bytesOrPercent',
  offset: 'bytesOrPercent',
  ramp_time: 'time',
  rate_iops: 'int',
  verify: 'verify',
  randseed: 'int',
  hctx: 'name',
  stonewall: 'flag',
  name: 'name',
  // Connect options of the initiator (read from [global] by `nvme-tcp bench`; flags override them).
  io_workers: 'int',
  io_worker_cpus: 'cpus',
  io_budget_us: 'int',
};

/** Connect options a job file may carry in [global], with their ConnectOptions names. */
export const CONNECT_KEYS = ['io_workers', 'io_worker_cpus', 'io_budget_us'] as const;

/** "0,1" or "0-3,6" → CPU numbers (io_worker_cpus). */
export function parseCpus(v: string, line?: number): number[] {
  const out: number[] = [];
  for (const part of v.split(',')) {
    const m = /^\s*(\d+)(?:-(\d+))?\s*$/.exec(part);
    if (m === null) throw new JobFileError(`io_worker_cpus must be a CPU list like 0,1 or 0-3, got "${v}"`, line);
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    for (let c = a; c <= b; c++) out.push(c);
  }
  return out;
}

/**
 * fio sizes: plain bytes or k/m/g/t suffixes (powers of 1024, fio's default kb_base), optional "b"/"ib": the target's
 * and the bin's size parser (protocol/values/size.ts), which reads them the same way.
 */
export function parseBytes(v: string, line?: number): number {
  if (!/^\s*\d+(?:\.\d+)?\s*[kmgt]?(?:i?b)?\s*$/i.test(v)) throw new JobFileError(`cannot parse size "${v}"`, line);
  try {
    return parseSize(v);
  } catch {
    throw new JobFileError(`size "${v}" is not a whole number of bytes`, line);
  }
}

/** fio times: plain numbers are seconds; suffixes us, ms, s, m, h (the bin's duration parser). Returns milliseconds. */
export function parseTimeMs(v: string, line?: number): number {
  if (v.trim().startsWith('-')) throw new JobFileError(`cannot parse time "${v}"`, line);
  try {
    return parseDuration(v, 's') * 1000;
  } catch {
    throw new JobFileError(`cannot parse time "${v}"`, line);
  }
}

/** `4k/50:64k/50` → entries; an entry without a weight shares what the others leave of 100. */
export function parseBsSplit(v: string, line?: number): BsSplitEntry[] {
  const parts = v.split(':').filter((p) => p.trim() !== '');
  if (parts.length === 0) throw new JobFileError(`empty bssplit "${v}"`, line);
  const entries: { bs: number; weight: number | undefined }[] = parts.map((p) => {
    const [bs, w] = p.split('/');
    const weight = w === undefined || w.trim() === '' ? undefined : Number(w);
    if (weight !== undefined && (!Number.isFinite(weight) || weight < 0)) throw new JobFileError(`bad bssplit weight in "${p}"`, line);
    return { bs: parseBytes(bs ?? '', line), weight };
  });
  const given = entries.reduce((s, e) => s + (e.weight ?? 0), 0);
  const unweighted = entries.filter((e) => e.weight === undefined).length;
  const share = unweighted === 0 ? 0 : Math.max(0, 100 - given) / unweighted;
  const out = entries.map((e) => ({ bs: e.bs, weight: e.weight ?? share }));
  if (out.every((e) => e.weight === 0)) throw new JobFileError(`bssplit "${v}" has no positive weight`, line);
  return out;
}

/**
 * fio options that choose where and how the I/O goes. Ours always goes through this initiator to the NVMe/TCP target
 * of -a/-s/-n (or --target, or an in-process RAM target), so a job that names a device or an I/O engine is refused
 * rather than run silently against something else.
 */
const REFUSED: Readonly<Record<string, string>> = {
  filename: 'bench runs against the NVMe/TCP target of -a/-s/-n (or --target, or an in-process RAM target), not a file or device; remove the line and give the target with -a ADDR -s PORT -n NQN',
  filename_format: 'bench runs against one NVMe/TCP namespace (--nsid), not files; remove the line',
  directory: 'bench runs against one NVMe/TCP namespace (--nsid), not files; remove the line',
  ioengine: 'bench submits through its own NVMe/TCP initiator, not a kernel or plugin I/O engine; remove the line',
};

/** Options refused with the fix, by key: REFUSED for our initiator; the Linux host's runs pass their own. */
export type RefusedOptions = Readonly<Record<string, string>>;

function checkValue(key: string, value: string, line: number | undefined, refusedOptions: RefusedOptions): void {
  const refused = refusedOptions[key];
  if (refused !== undefined) throw new JobFileError(`${key}=${value}: ${refused}`, line);
  const kind = OPTIONS[key];
  switch (kind) {
    case undefined:
      throw new JobFileError(`unknown option "${key}"`, line);
    case 'rw':
      if (normalizeRw(value) === undefined) throw new JobFileError(`rw must be one of ${RW_MODES.join(', ')}, rw; got "${value}"`, line);
      return;
    case 'percent': {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0 || n > 100) throw new JobFileError(`${key} must be 0..100, got "${value}"`, line);
      return;
    }
    case 'bytes':
      parseBytes(value, line);
      return;
    case 'bytesOrPercent':
      if (!/^\s*\d+(\.\d+)?%\s*$/.test(value)) parseBytes(value, line);
      return;
    case 'bssplit':
      parseBsSplit(value, line);
      return;
    case 'cpus':
      parseCpus(value, line);
      return;
    case 'int': {
      const n = Number(value);
      if (!Number.isSafeInteger(n) || n < 0) throw new JobFileError(`${key} must be a non-negative integer, got "${value}"`, line);
      return;
    }
    case 'time':
      parseTimeMs(value, line);
      return;
    case 'flag':
      if (!['', '0', '1', 'true', 'false'].includes(value.trim())) throw new JobFileError(`${key} is a flag (1/0), got "${value}"`, line);
      return;
    case 'verify':
      if (parseVerify(value) === undefined) throw new JobFileError(`verify supports crc32c (or 0/none), got "${value}"`, line);
      return;
    case 'name':
      if (value.trim() === '') throw new JobFileError(`${key} must not be empty`, line);
      return;
  }
}

function normalizeRw(v: string): RwMode | undefined {
  const s = v.trim().toLowerCase();
  if (s === 'rw') return 'readwrite';
  return (RW_MODES as readonly string[]).includes(s) ? (s as RwMode) : undefined;
}

/** fio verify methods that mean "checksum each block"; ours is always crc32c with LBA + generation headers. */
function parseVerify(v: string): boolean | undefined {
  const s = v.trim().toLowerCase();
  if (s === '' || s === '0' || s === 'none' || s === 'false') return false;
  if (['1', 'true', 'crc32c', 'crc32c-intel', 'crc32'].includes(s)) return true;
  return undefined;
}

function canonicalKey(k: string): string {
  const key = k.trim().toLowerCase();
  return ALIASES[key] ?? key;
}

/** Parses fio's ini-like syntax: `;`/`#` comments, `[section]`, `key=value`, bare `key` flags. */
export function parseFioJobFile(text: string, refused: RefusedOptions = REFUSED): ParsedJobFile {
  const out: ParsedJobFile = { global: {}, jobs: [], ignored: [] };
  let current: RawOptions | undefined;
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const line = (lines[i] ?? '').replace(/\s[;#].*$/, '').trim();
    if (line === '' || line.startsWith(';') || line.startsWith('#')) continue;
    const sec = /^\[([^\]]+)\]$/.exec(line);
    if (sec !== null) {
      const name = (sec[1] ?? '').trim();
      if (name === '') throw new JobFileError('empty section name', lineNo);
      if (name.toLowerCase() === 'global') {
        current = out.global;
      } else {
        if (out.jobs.some((j) => j.name === name)) throw new JobFileError(`duplicate job "${name}"`, lineNo);
        current = {};
        out.jobs.push({ name, options: current });
      }
      continue;
    }
    if (current === undefined) throw new JobFileError('option outside a [section]', lineNo);
    const eq = line.indexOf('=');
    const key = canonicalKey(eq < 0 ? line : line.slice(0, eq));
    const value = eq < 0 ? '1' : line.slice(eq + 1).trim();
    if (IGNORED.has(key)) {
      if (!out.ignored.includes(key)) out.ignored.push(key);
      continue;
    }
    checkValue(key, value, lineNo, refused);
    current[key] = value;
  }
  if (out.jobs.length === 0) throw new JobFileError('no [job] section');
  return out;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function jsonOptions(o: Record<string, unknown>, where: string, ignored: string[], refused: RefusedOptions): RawOptions {
  const out: RawOptions = {};
  for (const [k, v] of Object.entries(o)) {
    const key = canonicalKey(k);
    if (IGNORED.has(key)) {
      if (!ignored.includes(key)) ignored.push(key);
      continue;
    }
    let s: string;
    if (typeof v === 'string') s = v;
    else if (typeof v === 'number' && Number.isFinite(v)) s = String(v);
    else if (typeof v === 'boolean') s = v ? '1' : '0';
    else throw new JobFileError(`${where}: option "${k}" must be a string, number or boolean`);
    try {
      checkValue(key, s, undefined, refused);
    } catch (e) {
      throw new JobFileError(`${where}: ${(e as Error).message}`);
    }
    out[key] = s;
  }
  return out;
}

/** JSON job file: `{ "global": {...}, "jobs": [{ "name": "a", "rw": "randread", ... }] }` with fio option names. */
export function parseJsonJobFile(text: string, refused: RefusedOptions = REFUSED): ParsedJobFile {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new JobFileError(`invalid JSON: ${(e as Error).message}`);
  }
  if (!isRecord(doc)) throw new JobFileError('JSON job file must be an object with "jobs"');
  const ignored: string[] = [];
  for (const k of Object.keys(doc)) if (k !== 'global' && k !== 'jobs') throw new JobFileError(`unknown top-level key "${k}"`);
  const g = doc['global'];
  if (g !== undefined && !isRecord(g)) throw new JobFileError('"global" must be an object');
  const jobs = doc['jobs'];
  if (!Array.isArray(jobs) || jobs.length === 0) throw new JobFileError('"jobs" must be a non-empty array');
  const out: ParsedJobFile = { global: g === undefined ? {} : jsonOptions(g, 'global', ignored, refused), jobs: [], ignored };
  jobs.forEach((j: unknown, i) => {
    if (!isRecord(j)) throw new JobFileError(`jobs[${i}] must be an object`);
    const options = jsonOptions(j, `jobs[${i}]`, ignored, refused);
    const name = options['name'] ?? `job${i}`;
    delete options['name'];
    if (out.jobs.some((x) => x.name === name)) throw new JobFileError(`duplicate job "${name}"`);
    out.jobs.push({ name, options });
  });
  return out;
}

/** Picks the parser by content: JSON when the text starts with `{`, fio syntax otherwise. */
export function parseJobFile(text: string, refused: RefusedOptions = REFUSED): ParsedJobFile {
  return text.trimStart().startsWith('{') ? parseJsonJobFile(text, refused) : parseFioJobFile(text, refused);
}

export interface Geometry {
  blockSize: number;
  capacityBlocks: number;
}

function bytesOrPercent(v: string, capacity: number): number {
  const m = /^\s*(\d+(?:\.\d+)?)%\s*$/.exec(v);
  return m === null ? parseBytes(v) : Math.floor((capacity * Number(m[1])) / 100);
}

function flag(v: string | undefined): boolean {
  return v !== undefined && ['', '1', 'true'].includes(v.trim());
}

/**
 * Applies fio defaults and the namespace geometry. Semantics follow fio: `size` is the region (and each clone's
 * I/O amount unless io_size is set); with `runtime` the job is time based (it loops over its region until the time
 * is up; fio needs time_based for that, we treat runtime alone as time based and say so in the docs).
 */
export function resolveJobs(file: ParsedJobFile, geo: Geometry): JobSpec[] {
  const capacity = geo.blockSize * geo.capacityBlocks;
  return file.jobs.map((j, idx): JobSpec => {
    const o: RawOptions = { ...file.global, ...j.options };
    const err = (msg: string): JobFileError => new JobFileError(`job "${j.name}": ${msg}`);
    const rw = normalizeRw(o['rw'] ?? 'read') as RwMode;
    const mixRead = o['rwmixread'] !== undefined ? Number(o['rwmixread']) : o['rwmixwrite'] !== undefined ? 100 - Number(o['rwmixwrite']) : 50;
    const bssplit = o['bssplit'] !== undefined ? parseBsSplit(o['bssplit']) : [{ bs: parseBytes(o['bs'] ?? '4k'), weight: 100 }];
    for (const e of bssplit) {
      if (e.bs === 0 || e.bs % geo.blockSize !== 0) throw err(`block size ${e.bs} is not a multiple of the ${geo.blockSize}-byte LBA`);
    }
    const maxBs = Math.max(...bssplit.map((e) => e.bs));
    const offset = o['offset'] !== undefined ? bytesOrPercent(o['offset'], capacity) : 0;
    if (offset % geo.blockSize !== 0) throw err(`offset ${offset} is not block aligned`);
    if (offset >= capacity) throw err(`offset ${offset} is beyond the namespace (${capacity} bytes)`);
    const sizeRaw = o['size'] !== undefined ? bytesOrPercent(o['size'], capacity) : capacity - offset;
    const size = Math.min(sizeRaw, capacity - offset);
    if (size < maxBs) throw err(`region of ${size} bytes is smaller than the block size ${maxBs}`);
    const ioSize = o['io_size'] !== undefined ? bytesOrPercent(o['io_size'], capacity) : size;
    const runtimeMs = o['runtime'] !== undefined ? parseTimeMs(o['runtime']) : undefined;
    if (runtimeMs === 0) throw err('runtime must be > 0');
    const iodepth = Number(o['iodepth'] ?? '1');
    const numjobs = Number(o['numjobs'] ?? '1');
    if (iodepth < 1) throw err('iodepth must be >= 1');
    if (numjobs < 1) throw err('numjobs must be >= 1');
    const rate = o['rate_iops'] !== undefined ? Number(o['rate_iops']) : undefined;
    return {
      name: j.name,
      rw,
      rwmixread: rw === 'read' || rw === 'randread' ? 100 : rw === 'write' || rw === 'randwrite' ? 0 : mixRead,
      bssplit,
      iodepth,
      numjobs,
      offset,
      size,
      ioSize,
      runtimeMs,
      rampMs: o['ramp_time'] !== undefined ? parseTimeMs(o['ramp_time']) : 0,
      rateIops: rate === undefined || rate === 0 ? undefined : rate,
      verify: parseVerify(o['verify'] ?? '0') === true,
      hctx: o['hctx'],
      seed: o['randseed'] !== undefined ? Number(o['randseed']) : 0x5eed + idx,
      stonewall: flag(o['stonewall']),
    };
  });
}

/** "4k", "128k", "4k/50:64k/50" for reports. */
export function formatBs(split: BsSplitEntry[]): string {
  const fmt = (n: number): string => (n % 1048576 === 0 ? `${n / 1048576}m` : n % 1024 === 0 ? `${n / 1024}k` : String(n));
  if (split.length === 1) return fmt((split[0] as BsSplitEntry).bs);
  return split.map((e) => `${fmt(e.bs)}/${Math.round(e.weight * 100) / 100}`).join(':');
}
