// `target ctl -o normal`: an API reply as aligned tables and "key  value" lines, with times as ISO 8601 (the API
// sends epoch milliseconds) and reservation keys in hex, as resv-report prints them.
import { table } from './args.js';

/** Keys that hold epoch milliseconds (docs/management.md: lastKeepAlive, lastCommand, ...). */
const TIME_KEY = /(^last[A-Z]|At$|Time$|^since$|^started$|^updated$)/;
/** Keys that hold reservation keys (64-bit; NVMe Base 2.0 §8.19). */
const RKEY_KEY = /^(rkey|crkey|prkey|nrkey|key)$/i;

function cell(key: string, v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (typeof v === 'number' && TIME_KEY.test(key) && v > 1e11) return new Date(v).toISOString();
  if (RKEY_KEY.test(key) && (typeof v === 'number' || (typeof v === 'string' && /^\d+$/.test(v)))) return `0x${BigInt(v).toString(16)}`;
  if (Array.isArray(v) && v.every((x) => typeof x !== 'object' || x === null)) return v.length === 0 ? '-' : v.map(String).join(',');
  // A list of records in a cell is its count; rowsTable prints the records themselves as a sub-table below.
  if (Array.isArray(v)) return String(v.length);
  // A record in a cell (a port's bound address, a backend): key=value pairs, nested the same way.
  if (isRecord(v)) return Object.keys(v).length === 0 ? '-' : Object.entries(v).map(([k, x]) => `${k}=${isRecord(x) ? `{${cell(k, x)}}` : cell(k, x)}`).join(' ');
  return String(v);
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isRecordList = (v: unknown): v is Record<string, unknown>[] => Array.isArray(v) && v.length > 0 && v.some(isRecord);

/**
 * Records as one aligned table; a column holding lists of records (a controller's queues, a subsystem's namespaces)
 * shows their count, and each row's list follows the table as its own sub-table headed by the row's first column
 * ("cntlid 1, queues:").
 */
function rowsTable(rows: readonly Record<string, unknown>[], indent: string): string {
  const keys: string[] = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!keys.includes(k)) keys.push(k);
  const indented = (s: string, pad: string): string =>
    s
      .split('\n')
      .map((l) => (l === '' ? l : pad + l))
      .join('\n');
  let out = indented(table(keys, rows.map((r) => keys.map((k) => cell(k, r[k])))), indent);
  const first = keys[0] ?? '';
  for (const r of rows) {
    for (const k of keys) {
      const list = r[k];
      if (!isRecordList(list)) continue;
      out += `\n${indent}${first} ${cell(first, r[first])}, ${k}:\n`;
      out += rowsTable(list.map((x) => (isRecord(x) ? x : { value: x })), `${indent}  `);
    }
  }
  return out;
}

function objectLines(o: Record<string, unknown>, indent: string): string {
  const w = Math.max(0, ...Object.keys(o).map((k) => k.length));
  let out = '';
  for (const [k, v] of Object.entries(o)) {
    if (Array.isArray(v) && v.length > 0 && v.every(isRecord)) out += `${indent}${k}:\n${rowsTable(v, `${indent}  `)}`;
    else if (isRecord(v) && Object.keys(v).length > 0) out += `${indent}${k}:\n${objectLines(v, `${indent}  `)}`;
    else out += `${indent}${k.padEnd(w)}  ${cell(k, v)}\n`;
  }
  return out;
}

/** The reply for a person: a table for a list of records, aligned lines for a record. */
export function formatNormal(out: unknown): string {
  if (Array.isArray(out)) {
    if (out.length === 0) return '(none)\n';
    if (out.every(isRecord)) return rowsTable(out, '');
    return out.map((x) => cell('', x)).join('\n') + '\n';
  }
  if (isRecord(out)) return objectLines(out, '');
  return `${cell('', out)}\n`;
}
