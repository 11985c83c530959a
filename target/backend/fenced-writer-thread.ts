// The writer thread of a fenced file backend (FencedWriter, docs/gateway-groups.md "Fencing at the storage call"):
// runs every write-type operation of one file with synchronous syscalls, and reads the lease deadline immediately
// before each one. A freeze of the process can then only fall between that check and the syscall's entry; a freeze
// during the syscall lets the copy into the page cache finish first (the freezer and SIGSTOP stop a task on its
// return to user space). The libuv pool gives no such bound: a queued fs.writev runs whenever the pool gets to it.
// Self-contained on purpose (node: modules only at run time; the type import is erased): the thread loads this file
// directly, .ts under Node's type stripping or .js from dist/, with no loader to map the sources' .js specifiers.
import { Buffer } from 'node:buffer';
import fs from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import type { WriterDone as ThreadDone, WriterOp as ThreadOp } from './fenced-writer.js';

const { fd, deadline } = workerData as { fd: number; deadline: SharedArrayBuffer };
// WriteFence's layout (target/backend/write-fence.ts): one int64, ms since the epoch, 2^63-1 for never.
const cell = new BigInt64Array(deadline);
const ZEROS = Buffer.alloc(1024 * 1024);

function fenced(): boolean {
  return BigInt(Date.now()) >= Atomics.load(cell, 0);
}

/** Writes `buf` at `pos`, continuing short writes; the deadline is read before every syscall. False: refused. */
function writeChecked(buf: Uint8Array, pos: number): boolean {
  let rest = buf;
  let at = pos;
  while (rest.length > 0) {
    if (fenced()) return false;
    const n = fs.writeSync(fd, rest, 0, rest.length, at);
    rest = rest.subarray(n);
    at += n;
  }
  return true;
}

/** Zeroes in 1 MiB syscalls; a refusal part way leaves the earlier chunks zeroed (as a failed Write Zeroes may). */
function zeroChecked(pos: number, length: number): boolean {
  for (let done = 0; done < length; ) {
    const n = Math.min(length - done, ZEROS.length);
    if (!writeChecked(ZEROS.subarray(0, n), pos + done)) return false;
    done += n;
  }
  return true;
}

function run(op: ThreadOp): ThreadDone {
  try {
    const ok = op.data !== undefined ? writeChecked(op.data, op.offset) : zeroChecked(op.offset, op.zeroes ?? 0);
    if (!ok) return { id: op.id, code: 'FENCED' };
    return { id: op.id };
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return { id: op.id, code: err.code ?? 'EIO', message: err.message };
  }
}

/**
 * A batch in order, then one fdatasync for the FUA operations among those that succeeded (not fenced again: their
 * bytes are in the file already, and durability is not ordering), then one reply for the batch.
 */
parentPort?.on('message', (ops: ThreadOp[]) => {
  const done = ops.map(run);
  const fua = ops.filter((op, i) => op.fua && done[i]?.code === undefined);
  if (fua.length > 0) {
    try {
      fs.fdatasyncSync(fd);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      for (const d of done) if (d.code === undefined && fua.some((op) => op.id === d.id)) Object.assign(d, { code: err.code ?? 'EIO', message: err.message });
    }
  }
  parentPort?.postMessage(done);
});
