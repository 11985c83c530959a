// Block API over one controller's namespace (Linux drivers/nvme/host/core.c nvme_setup_rw / nvme_setup_discard):
// requests larger than MDTS are split; each piece is one NVMe command on the caller's hctx.
import { Buffer } from 'node:buffer';
import {
  DSM_MAX_RANGES,
  NvmOpcode,
  PSDT_SGL,
  RwCdw12,
  SqeOffset,
  encodeDsmCmd,
  encodeDsmRanges,
  encodeCopyCmd,
  encodeCopyRanges,
  encodeSqe,
  encodeWriteZeroesCmd,
  RESV_REPORT_EDS,
  decodeResvStatus,
  encodeResvAcquireCdw10,
  encodeResvCmd,
  encodeResvKeys,
  encodeResvRegisterCdw10,
  encodeResvReleaseCdw10,
  encodeResvReleaseData,
  type AnaStateName,
  type ResvStatus,
} from '../protocol/index.js';
import { InvalidArgumentError } from './errors.js';
import { wr32 } from '../protocol/le.js';
import type { Completion, IoRequest, IoSqeBuilder, SubmitSpec } from './queue-pair.js';
import { NamespaceZones } from './zones.js';

/** All-zero SQE that buildIoSqe starts from. */
const ZERO_SQE = new Uint8Array(64);

export type { IoRequest } from './queue-pair.js';

/** Where an I/O goes: which hctx (submission context) and whether transport errors fail at once (multipath). */
export interface IoOptions {
  /** Submission context index (default 0); writes use the write hctxs when nr_write_queues > 0. */
  hctx?: number;
  /** Use the poll hctxs (nr_poll_queues). */
  poll?: boolean;
  /** Fail on a transport error instead of waiting for reconnect (REQ_FAILFAST_TRANSPORT, used by multipath). */
  failfast?: boolean;
  /** Force Unit Access on reads/writes. */
  fua?: boolean;
}

/**
 * The controller side a Namespace needs: the one I/O path (submitIo, with the retry/requeue policy), the promise
 * adapter over it (execIo) and the transfer limit.
 */
export interface IoExecutor {
  execIo(build: () => SubmitSpec, opts: IoOptions & { write: boolean }): Promise<Completion>;
  /**
   * Submit a command of at most maxTransferBytes (Controller.submitIo), with `io.builder`, `io.hctx` and `io.retries`
   * set; `io.ioDone` is called once.
   */
  submitIo(io: IoRequest): void;
  /** Largest data transfer of one command in bytes (MDTS). */
  readonly maxTransferBytes: number;
  readonly ioTimeoutMs: number;
}

/** Namespace identity and geometry from Identify Namespace (CNS 0) and the descriptor list (CNS 3). */
export interface NamespaceInfo {
  nsid: number;
  /** Size in logical blocks (NSZE). */
  blocks: bigint;
  /** Logical block size in bytes (2^LBADS of the formatted LBA format). */
  blockSize: number;
  /** 32 hex chars, or '' when the namespace reports none. */
  nguid: string;
  /** 36-char UUID, or ''. */
  uuid: string;
  eui64: string;
  /** ANA group (0 when the controller does not report ANA). */
  anagrpid: number;
  /** NMIC bit 0: may be shared by several controllers (multipath). */
  shared: boolean;
  readOnly: boolean;
}

export interface DeallocateRange {
  /** First logical block: a safe integer, as every LBA of this API (see Namespace). */
  lba: number;
  blocks: number;
}

/** One source range of Namespace.copy: `blocks` from `lba` (1..65,536 blocks, the 16-bit NLB). */
export type CopySourceRange = DeallocateRange;

/** Reservation Register (NVMe Base 2.0 §7.3): action 0 register, 1 unregister, 2 replace (nvme-cli --rrega). */
export interface ResvRegisterOptions {
  /** Current reservation key (--crkey); default 0. */
  crkey?: bigint;
  /** New reservation key (--nrkey); default 0. */
  nrkey?: bigint;
  /** 0 register (default), 1 unregister, 2 replace. */
  rrega?: number;
  /** Ignore existing key (--iekey). */
  iekey?: boolean;
  /** Change PTPL (--cptpl): 0 no change, 2 clear, 3 set. */
  cptpl?: number;
}
/** Reservation Acquire (§7.2): 0 acquire, 1 preempt, 2 preempt and abort (--racqa). */
export interface ResvAcquireOptions {
  crkey?: bigint;
  /** Preempt reservation key (--prkey). */
  prkey?: bigint;
  /** Reservation type 1..6 (--rtype). */
  rtype: number;
  racqa?: number;
  iekey?: boolean;
}
/** Reservation Release (§7.5): 0 release, 1 clear (--rrela). */
export interface ResvReleaseOptions {
  crkey?: bigint;
  rtype?: number;
  rrela?: number;
  iekey?: boolean;
}
/** Reservation Report (§7.4). */
export interface ResvReportOptions {
  /** Extended data structure (--eds), default true: NVMe over Fabrics host identifiers are 128-bit. */
  eds?: boolean;
  /** Bytes to ask for (NUMD), default 4096. */
  length?: number;
}
export interface ResvReport extends ResvStatus {
  /** Registrants the controller counted (may exceed regctls when the buffer was short). */
  regctlCount: number;
}

/** The four reservation commands of one namespace (ns.reservation). Failures reject with NvmeStatusError. */
export class NamespaceReservation {
  readonly #ns: Namespace;
  readonly #exec: IoExecutor;

  constructor(ns: Namespace, exec: IoExecutor) {
    this.#ns = ns;
    this.#exec = exec;
  }

  #run(sqe: Buffer, data: { h2c?: Buffer; c2h?: Buffer }): Promise<Completion> {
    return this.#exec.execIo(() => ({ sqe, ...data, timeoutMs: this.#exec.ioTimeoutMs }), { write: data.h2c !== undefined });
  }

  async register(o: ResvRegisterOptions = {}): Promise<void> {
    const cdw10 = encodeResvRegisterCdw10({ rrega: o.rrega ?? 0, iekey: o.iekey === true, cptpl: o.cptpl ?? 0 });
    await this.#run(encodeResvCmd({ opcode: NvmOpcode.RESV_REGISTER, cid: 0, nsid: this.#ns.nsid, cdw10 }), { h2c: encodeResvKeys(o.crkey ?? 0n, o.nrkey ?? 0n) });
  }

  async acquire(o: ResvAcquireOptions): Promise<void> {
    const cdw10 = encodeResvAcquireCdw10({ racqa: o.racqa ?? 0, iekey: o.iekey === true, rtype: o.rtype });
    await this.#run(encodeResvCmd({ opcode: NvmOpcode.RESV_ACQUIRE, cid: 0, nsid: this.#ns.nsid, cdw10 }), { h2c: encodeResvKeys(o.crkey ?? 0n, o.prkey ?? 0n) });
  }

  async release(o: ResvReleaseOptions = {}): Promise<void> {
    const cdw10 = encodeResvReleaseCdw10({ rrela: o.rrela ?? 0, iekey: o.iekey === true, rtype: o.rtype ?? 0 });
    await this.#run(encodeResvCmd({ opcode: NvmOpcode.RESV_RELEASE, cid: 0, nsid: this.#ns.nsid, cdw10 }), { h2c: encodeResvReleaseData(o.crkey ?? 0n) });
  }

  async report(o: ResvReportOptions = {}): Promise<ResvReport> {
    const len = o.length ?? 4096;
    if (!Number.isInteger(len) || len < 24 || len % 4 !== 0) throw new InvalidArgumentError('length', `${len}: use a multiple of 4, at least 24`);
    const eds = o.eds !== false;
    const buf = Buffer.alloc(len);
    await this.#run(encodeResvCmd({ opcode: NvmOpcode.RESV_REPORT, cid: 0, nsid: this.#ns.nsid, cdw10: len / 4 - 1, cdw11: eds ? RESV_REPORT_EDS : 0 }), { c2h: buf });
    return decodeResvStatus(buf, eds);
  }
}

/** Largest block count one Read/Write/Write Zeroes can carry (NLB is 16-bit, 0's based). */
const MAX_NLB = RwCdw12.NLB_MASK + 1;

/**
 * One namespace's block I/O: the promise API (read, write, ...) and the callback API (submit) over the controller's
 * one I/O path. An LBA is a number everywhere in both: a non-negative safe integer. SLBA is 64-bit (NVM Command Set
 * 1.0 §3.2.4), but 2^53 blocks is 4 EiB at 512-byte blocks, far beyond any namespace, while a bigint would cost an
 * allocation per command on the callback path and a conversion at every caller (the load engine, the CLI, offsets
 * computed from byte positions). The BigInt SLBA is made once, when a promise-API command's SQE is encoded. NSZE
 * (`blocks`) stays the bigint Identify Namespace reports.
 */
export class Namespace implements IoSqeBuilder {
  readonly #exec: IoExecutor;
  #info!: NamespaceInfo;
  /** info.blocks as a number, for submit()'s range check without a BigInt conversion per command. */
  #capacity = 0;
  /** maxBlocksPerCommand for the maxTransferBytes it was computed from (it changes only on reconnect). */
  #maxBlocks = 0;
  #maxBlocksFor = -1;
  /** ANA state of this namespace's group on this controller ('optimized' when ANA is not reported). */
  anaState: AnaStateName = 'optimized';
  /** Reservation Register / Acquire / Release / Report on this namespace (NVMe Base 2.0 §8.19). */
  readonly reservation: NamespaceReservation;
  /** Zone reports, actions and Zone Append (ZNS 1.1 §3.4); a conventional namespace answers them Invalid Opcode. */
  readonly zones: NamespaceZones;

  constructor(exec: IoExecutor, info: NamespaceInfo) {
    this.#exec = exec;
    this.info = info;
    this.reservation = new NamespaceReservation(this, exec);
    const self = this;
    this.zones = new NamespaceZones({
      get nsid() {
        return self.nsid;
      },
      get blockSize() {
        return self.blockSize;
      },
      execIo: (build, write) => exec.execIo(() => ({ ...build(), timeoutMs: exec.ioTimeoutMs }), { write }),
      // Zone Append has the Write layout (ZNS 1.1 §3.4.1): the same one writer as Read and Write.
      rwSqe: (opcode, lba, blocks, fua) => this.#rw(opcode, lba, blocks, fua),
    });
  }

  get info(): NamespaceInfo {
    return this.#info;
  }

  /** Set at creation and by a rescan that found the namespace changed (resize, new identifiers). */
  set info(v: NamespaceInfo) {
    this.#info = v;
    this.#capacity = Number(v.blocks);
  }

  get nsid(): number {
    return this.info.nsid;
  }

  get blockSize(): number {
    return this.info.blockSize;
  }

  get blocks(): bigint {
    return this.info.blocks;
  }

  get sizeBytes(): bigint {
    return this.info.blocks * BigInt(this.info.blockSize);
  }

  /** Blocks per command: MDTS and the 16-bit NLB bound. */
  get maxBlocksPerCommand(): number {
    const mtb = this.#exec.maxTransferBytes;
    if (mtb !== this.#maxBlocksFor) {
      this.#maxBlocksFor = mtb;
      this.#maxBlocks = Math.max(1, Math.min(MAX_NLB, Math.floor(mtb / this.info.blockSize)));
    }
    return this.#maxBlocks;
  }

  /** The range check of every I/O, both APIs: a non-negative safe-integer LBA, whole blocks, inside the namespace. */
  #check(lba: number, blocks: number): void {
    if (!Number.isSafeInteger(lba) || lba < 0) throw new InvalidArgumentError('lba', `must be a non-negative safe integer, got ${lba}`);
    if (!Number.isInteger(blocks) || blocks < 1) throw new InvalidArgumentError('blocks', `must be a positive integer, got ${blocks}`);
    if (lba + blocks > this.#capacity) throw this.#beyond(lba, blocks);
  }

  /** A Read/Write-family SQE of its own for the promise path (SubmitSpec), by the one writer both APIs use (#writeRw). */
  #rw(opcode: number, lba: number, blocks: number, fua: boolean): Buffer {
    const sqe = Buffer.allocUnsafe(64);
    this.#writeRw(sqe, opcode, lba, blocks, fua);
    return sqe;
  }

  /** Run [lba, lba+blocks) as commands of at most maxBlocksPerCommand, all in flight at once. */
  async #split(lba: number, blocks: number, one: (lba: number, blocks: number, byteOff: number) => Promise<unknown>): Promise<void> {
    const per = this.maxBlocksPerCommand;
    if (blocks <= per) {
      await one(lba, blocks, 0);
      return;
    }
    const parts: Promise<unknown>[] = [];
    for (let done = 0; done < blocks; done += per) {
      const n = Math.min(per, blocks - done);
      parts.push(one(lba + done, n, done * this.info.blockSize));
    }
    await Promise.all(parts);
  }

  /** Read `blocks` blocks at `lba` into `buf` (allocated when omitted). */
  async read(lba: number, blocks: number, buf?: Buffer, opts: IoOptions = {}): Promise<Buffer> {
    this.#check(lba, blocks);
    const len = blocks * this.info.blockSize;
    const out = buf ?? Buffer.allocUnsafe(len);
    if (out.length < len) throw new InvalidArgumentError('buf', `${out.length} bytes, need ${len}`);
    await this.#split(lba, blocks, (l, n, off) =>
      this.#exec.execIo(() => ({ sqe: this.#rw(NvmOpcode.READ, l, n, opts.fua === true), c2h: out.subarray(off, off + n * this.info.blockSize), timeoutMs: this.#exec.ioTimeoutMs }), { ...opts, write: false }),
    );
    return out;
  }

  /**
   * Read or write through the callback API: `io` is caller-owned and reusable, `io.ioDone` is called once (with
   * undefined on success). A request of at most maxBlocksPerCommand blocks is one command with nothing allocated per
   * I/O; a larger one is split through the promise path. Argument errors throw here, before anything is submitted.
   */
  submit(io: IoRequest, hctx = 0): void {
    const blocks = io.blocks;
    this.#check(io.lba, blocks);
    const len = blocks * this.info.blockSize;
    if (io.buf.length < len) throw new InvalidArgumentError('buf', `${io.buf.length} bytes, need ${len}`);
    if (blocks <= this.maxBlocksPerCommand) {
      io.builder = this;
      io.hctx = hctx;
      io.retries = 0;
      this.#exec.submitIo(io);
    } else this.#submitSplit(io, hctx, len);
  }

  /**
   * The range error, built apart: with this message inline (a template reading the `info` getter's BigInt), V8
   * allocated 24 bytes on every submit() call, thrown or not (docs/performance.md, "Host path, fourth pass").
   */
  #beyond(lba: number, blocks: number): InvalidArgumentError {
    return new InvalidArgumentError('lba', `${lba}+${blocks} beyond namespace size ${this.info.blocks}`);
  }

  /**
   * submit() of a request larger than one command: split by read()/write() (each piece one command on the same path).
   * Its closures live here: in submit() itself they made V8 allocate a context on every call (docs/performance.md,
   * "Host path, third pass").
   */
  #submitSplit(io: IoRequest, hctx: number, len: number): void {
    const opts: IoOptions = { hctx, fua: io.fua === true, failfast: io.failfast === true, poll: io.poll === true };
    const buf = io.buf.length === len ? io.buf : io.buf.subarray(0, len);
    const done = io.write ? this.write(io.lba, buf, opts) : this.read(io.lba, io.blocks, buf, opts);
    done.then(
      () => io.ioDone(undefined),
      (e: unknown) => io.ioDone(e instanceof Error ? e : new Error(String(e))),
    );
  }

  /** IoSqeBuilder: Read/Write SQE (NVM Command Set 1.0 §3.2.4/§3.2.6) written in place, no allocation. */
  buildIoSqe(sqe: Buffer, io: IoRequest): number {
    this.#writeRw(sqe, io.write ? NvmOpcode.WRITE : NvmOpcode.READ, io.lba, io.blocks, io.fua === true);
    return io.blocks * this.info.blockSize;
  }

  /**
   * The initiator's one Read/Write-family SQE writer (NVM Command Set 1.0 §3.2.4/§3.2.6; Compare shares the layout):
   * all 64 bytes but CID and SGL, which the queue fills in (QueuePair: CID, setSgl). TypedArray set and plain byte
   * stores: Buffer.fill and writeUInt32LE's argument checks were ~3 % of the host's CPU per I/O (docs/performance.md,
   * "Host path, third pass").
   */
  #writeRw(sqe: Buffer, opcode: number, lba: number, blocks: number, fua: boolean): void {
    sqe.set(ZERO_SQE);
    sqe[SqeOffset.opcode] = opcode;
    sqe[SqeOffset.flags] = PSDT_SGL;
    wr32(sqe, SqeOffset.nsid, this.info.nsid);
    // SLBA is CDW11:CDW10; wr32 stores the low 32 bits, exact for any safe integer split this way.
    wr32(sqe, SqeOffset.cdw10, lba >>> 0);
    wr32(sqe, SqeOffset.cdw11, Math.floor(lba / 0x1_0000_0000));
    wr32(sqe, SqeOffset.cdw12, ((blocks - 1) & RwCdw12.NLB_MASK) | (fua ? RwCdw12.FUA : 0));
  }

  /** Write `data` (a whole number of blocks) at `lba`. */
  async write(lba: number, data: Buffer, opts: IoOptions = {}): Promise<void> {
    const blocks = this.#blocksOf(data);
    this.#check(lba, blocks);
    await this.#split(lba, blocks, (l, n, off) =>
      this.#exec.execIo(() => ({ sqe: this.#rw(NvmOpcode.WRITE, l, n, opts.fua === true), h2c: data.subarray(off, off + n * this.info.blockSize), timeoutMs: this.#exec.ioTimeoutMs }), { ...opts, write: true }),
    );
  }

  /** Compare `data` with the blocks at `lba`; a mismatch rejects with NvmeStatusError COMPARE_FAILED (0x285). */
  async compare(lba: number, data: Buffer, opts: IoOptions = {}): Promise<void> {
    const blocks = this.#blocksOf(data);
    this.#check(lba, blocks);
    await this.#split(lba, blocks, (l, n, off) =>
      this.#exec.execIo(() => ({ sqe: this.#rw(NvmOpcode.COMPARE, l, n, false), h2c: data.subarray(off, off + n * this.info.blockSize), timeoutMs: this.#exec.ioTimeoutMs }), { ...opts, write: true }),
    );
  }

  async flush(opts: IoOptions = {}): Promise<void> {
    await this.#exec.execIo(() => ({ sqe: encodeSqe({ opcode: NvmOpcode.FLUSH, cid: 0, nsid: this.info.nsid }), timeoutMs: this.#exec.ioTimeoutMs }), { ...opts, write: true });
  }

  /** Write Zeroes (NVM Command Set 1.0 §3.2.8); `deac` asks the controller to deallocate (CDW12 bit 25). */
  async writeZeroes(lba: number, blocks: number, flags: { deac?: boolean } = {}, opts: IoOptions = {}): Promise<void> {
    this.#check(lba, blocks);
    await this.#noData(lba, blocks, opts, (l, n) => encodeWriteZeroesCmd({ cid: 0, nsid: this.info.nsid, slba: BigInt(l), nlb: n, deac: flags.deac === true, fua: opts.fua === true }));
  }

  /**
   * Verify (NVM Command Set 1.0 §3.2.9): the controller reads the range and returns nothing; a block it cannot read
   * (one Write Uncorrectable marked, a medium error) rejects with NvmeStatusError READ_ERROR (0x281).
   */
  async verify(lba: number, blocks: number, opts: IoOptions = {}): Promise<void> {
    this.#check(lba, blocks);
    await this.#noData(lba, blocks, { ...opts, write: false }, (l, n) => this.#rw(NvmOpcode.VERIFY, l, n, false));
  }

  /**
   * Write Uncorrectable (NVM Command Set 1.0 §3.2.7): marks the range so that reading it fails with READ_ERROR until
   * it is written again (Write, Write Zeroes, deallocate). For testing a host's error path.
   */
  async writeUncorrectable(lba: number, blocks: number, opts: IoOptions = {}): Promise<void> {
    this.#check(lba, blocks);
    await this.#noData(lba, blocks, opts, (l, n) => this.#rw(NvmOpcode.WRITE_UNCOR, l, n, false));
  }

  /** A command without data over [lba, lba+blocks), as commands of at most 65,536 blocks (NLB), all in flight at once. */
  async #noData(lba: number, blocks: number, opts: IoOptions & { write?: boolean }, sqe: (lba: number, blocks: number) => Buffer): Promise<void> {
    const parts: Promise<unknown>[] = [];
    for (let done = 0; done < blocks; done += MAX_NLB) {
      const n = Math.min(MAX_NLB, blocks - done);
      const l = lba + done;
      parts.push(this.#exec.execIo(() => ({ sqe: sqe(l, n), timeoutMs: this.#exec.ioTimeoutMs }), { ...opts, write: opts.write ?? true }));
    }
    await Promise.all(parts);
  }

  /** Dataset Management with AD (deallocate), up to DSM_MAX_RANGES ranges per command (NVM Command Set 1.0 §3.2.3). */
  async deallocate(ranges: readonly DeallocateRange[], opts: IoOptions = {}): Promise<void> {
    if (ranges.length === 0) throw new InvalidArgumentError('ranges', 'at least one range');
    for (const r of ranges) {
      if (r.blocks > 0xffff_ffff) throw new InvalidArgumentError('ranges', `range of ${r.blocks} blocks exceeds 2^32-1`);
      this.#check(r.lba, r.blocks);
    }
    const parts: Promise<unknown>[] = [];
    for (let i = 0; i < ranges.length; i += DSM_MAX_RANGES) {
      const chunk = ranges.slice(i, i + DSM_MAX_RANGES);
      const data = encodeDsmRanges(chunk.map((r) => ({ cattr: 0, nlb: r.blocks, slba: BigInt(r.lba) })));
      parts.push(
        this.#exec.execIo(
          () => ({
            sqe: encodeDsmCmd({ cid: 0, nsid: this.info.nsid, count: chunk.length, ad: true }),
            h2c: data,
            timeoutMs: this.#exec.ioTimeoutMs,
          }),
          { ...opts, write: true },
        ),
      );
    }
    await Promise.all(parts);
  }

  /**
   * Copy (NVM Command Set 1.0 §3.2.2): the source ranges, in order, to consecutive blocks from `dest`, in one command
   * with Descriptor Format `format` (0: 32-byte entries, 1: 40-byte; no protection information). The controller's
   * limits (Identify Namespace MSSRL, MCL, MSRC) are its to enforce: past them it answers Command Size Limit Exceeded.
   */
  async copy(sources: readonly CopySourceRange[], dest: number, o: { format?: 0 | 1 } & IoOptions = {}): Promise<void> {
    if (sources.length === 0 || sources.length > 256) throw new InvalidArgumentError('sources', `1 to 256 ranges, got ${sources.length}`);
    let total = 0;
    for (const r of sources) {
      if (r.blocks > 65536) throw new InvalidArgumentError('sources', `range of ${r.blocks} blocks exceeds the 16-bit NLB (65536)`);
      this.#check(r.lba, r.blocks);
      total += r.blocks;
    }
    this.#check(dest, total);
    const format = o.format ?? 0;
    const data = encodeCopyRanges(sources.map((r) => ({ slba: BigInt(r.lba), nlb: r.blocks })), format);
    await this.#exec.execIo(
      () => ({ sqe: encodeCopyCmd({ cid: 0, nsid: this.info.nsid, sdlba: BigInt(dest), count: sources.length, format, fua: o.fua === true }), h2c: data, timeoutMs: this.#exec.ioTimeoutMs }),
      { ...o, write: true },
    );
  }

  #blocksOf(data: Buffer): number {
    if (data.length === 0 || data.length % this.info.blockSize !== 0) {
      throw new InvalidArgumentError('data', `${data.length} bytes is not a whole number of ${this.info.blockSize}-byte blocks`);
    }
    return data.length / this.info.blockSize;
  }
}
