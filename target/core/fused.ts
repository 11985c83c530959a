// Fused Compare and Write (NVMe Base 2.0 §3.4.2, NVM Command Set 1.0 §3.2.1): a Compare with FUSE 01b followed on the
// same submission queue by a Write with FUSE 10b over the same LBA range. The Write runs only if the Compare matched,
// and no other command of the namespace runs in between: while a pair executes, the namespace is held exclusive
// (TargetNamespace.exclusive): commands reaching execute wait, and the pair starts once every command already
// running there has completed. Offered where the namespace lives in one process (Subsystem.mediaStateLocal): with
// target workers or in a gateway group another process could write the range in between.
import { Buffer } from 'node:buffer';
import { DNR, NvmOpcode, RwCdw12, SqeFlags, SqeOffset, Status, rd16, rd32 } from '../../protocol/index.js';
import type { NsExclusive, TargetNamespace } from './namespace.js';
import type { QueueModel } from './queue-model.js';
import { ReqStateId, type Request } from './request.js';

/** FUSE values (SQE byte 1 bits 1:0). */
export const Fuse = { NONE: 0, FIRST: 1, SECOND: 2 } as const;

/** The queue's side of fusing: the first command waiting for its second (one per submission queue). */
export class FusedPairing {
  #first: Request | undefined;

  /**
   * Before a command is parsed: a first command still waiting for its second, when this one is not that second,
   * completes with Command Aborted due to Missing Fused Command (NVMe Base 2.0 Figure 96, 0Ah).
   */
  beforeParse(q: QueueModel, req: Request): void {
    const first = this.#first;
    if (first === undefined || (req.flags & SqeFlags.FUSE_MASK) === Fuse.SECOND) return;
    this.#first = undefined;
    failFused(q, first, Status.FUSED_MISSING);
  }

  /**
   * A command completes (CoreQueue.complete; the caller checked it is fused). A half that completes outside its pair's
   * run (aborted while waiting for its data, a data digest error) takes its partner with it (Command Aborted due to
   * Failed Fused Command), and a first still waiting for its second is forgotten: the queue keeps no reference to a
   * Request that is recycled.
   */
  completed(q: QueueModel, req: Request): void {
    if (req === this.#first) this.#first = undefined;
    const other = req.partner;
    if (other === undefined) return;
    req.partner = undefined;
    failFused(q, other, Status.FUSED_FAIL);
  }

  /**
   * The checks of a fused command before the command's own parse (`parse`, which returns its status): the pairing,
   * the opcode each half may be, and for the second the first's range. Returns the status.
   */
  parse(q: QueueModel, req: Request, local: boolean, parse: () => number): number {
    const fuse = req.flags & SqeFlags.FUSE_MASK;
    const first = fuse === Fuse.SECOND ? this.#first : undefined;
    this.#first = undefined;
    if (q.qid === 0 || !local || fuse === 3 || (fuse === Fuse.FIRST && req.opcode !== NvmOpcode.COMPARE)) {
      req.errorLoc = SqeOffset.flags;
      return Status.INVALID_FIELD | DNR;
    }
    if (fuse === Fuse.SECOND) {
      if (first === undefined) {
        req.errorLoc = SqeOffset.flags;
        return Status.FUSED_MISSING;
      }
      // The Write, over the Compare's namespace and range (NVM Command Set 1.0 §3.2.1).
      const same = req.opcode === NvmOpcode.WRITE && req.nsid === first.nsid && rd32(req.sqe, 40) === rd32(first.sqe, 40) && rd32(req.sqe, 44) === rd32(first.sqe, 44) && rd16(req.sqe, 48) === rd16(first.sqe, 48);
      const st = same ? parse() : Status.INVALID_FIELD | DNR;
      if (st !== 0) {
        if (!same) req.errorLoc = req.opcode === NvmOpcode.WRITE ? SqeOffset.cdw10 : SqeOffset.opcode;
        failFused(q, first, Status.FUSED_FAIL);
        return st;
      }
      first.partner = req;
      req.partner = first;
      req.execute = halfReady;
      return 0;
    }
    const st = parse();
    if (st !== 0) return st;
    req.partner = undefined;
    req.execute = halfReady;
    this.#first = req;
    return 0;
  }
}

/**
 * Completes a fused half that will not run: now if its data is in (it waits in execute for its partner), else once
 * its data arrives (the transport still expects the H2CData its R2T asked for).
 */
function failFused(q: QueueModel, req: Request, status: number): void {
  req.partner = undefined;
  if (req.stateId === ReqStateId.DONE || req.stateId === ReqStateId.FREE) return;
  if (req.fusedReady) q.complete(req, status);
  else req.execute = (r) => (r.queueRef as QueueModel).complete(r, status);
}

/** Either half's execute: its data is in. Once both are, the pair takes the namespace. */
function halfReady(req: Request): void {
  req.fusedReady = true;
  const other = req.partner;
  if (other === undefined || !other.fusedReady) {
    // Waiting for its partner, a half does not count as executing on the namespace: another pair holding it would
    // otherwise wait for this half, and this half's partner for that pair (a deadlock).
    const ns = req.ns as TargetNamespace;
    if (req.nsHeld) {
      req.nsHeld = false;
      ns.executing--;
      ns.exclusive?.check();
    }
    return;
  }
  const first = req.opcode === NvmOpcode.COMPARE ? req : other;
  const second = first === req ? other : req;
  const ns = first.ns as TargetNamespace;
  for (const half of [first, second]) {
    if (half.nsHeld || half.ns !== ns) continue;
    half.nsHeld = true;
    ns.executing++;
  }
  const ex: NsExclusive = {
    own: 2,
    waiters: [],
    started: false,
    check: () => {
      if (!ex.started && ns.executing <= ex.own) {
        ex.started = true;
        compareAndWrite(ns, first, second);
      }
    },
  };
  ns.exclusive = ex;
  ex.check();
}

function compareAndWrite(ns: TargetNamespace, first: Request, second: Request): void {
  const slba = rd32(first.sqe, 40) + rd32(first.sqe, 44) * 0x1_0000_0000;
  const nlb = rd16(first.sqe, 48) + 1;
  const off = slba * ns.blockSize;
  const end = (s1: number, s2: number): void => {
    first.partner = undefined;
    second.partner = undefined;
    (first.queueRef as QueueModel).complete(first, s1);
    (second.queueRef as QueueModel).complete(second, s2);
    release(ns);
  };
  if (ns.uncor.set.size !== 0 && ns.uncor.set.firstIn(slba, nlb) >= 0) return end(Status.READ_ERROR | DNR, Status.FUSED_FAIL);
  ns.backend.read(off, first.dataLen, (err, bufs) => {
    if (err) return end(Status.READ_ERROR, Status.FUSED_FAIL);
    const a = Buffer.concat(bufs, first.dataLen);
    const b = Buffer.concat(first.data ?? [], first.dataLen);
    if (!a.equals(b)) return end(Status.COMPARE_FAILED, Status.FUSED_FAIL);
    const fua = (rd32(second.sqe, SqeOffset.cdw12) & RwCdw12.FUA) !== 0;
    ns.backend.write(off, second.data ?? [], fua, (e2) => {
      if (e2) return end(0, Status.WRITE_FAULT);
      ns.counters.writes++;
      ns.counters.bytesWritten += second.dataLen;
      end(0, 0);
    });
  });
}

/** The pair is done: the commands that waited run, in arrival order (another pair among them takes the namespace again). */
function release(ns: TargetNamespace): void {
  const ex = ns.exclusive;
  ns.exclusive = undefined;
  if (ex === undefined) return;
  for (const resume of ex.waiters) resume();
}
