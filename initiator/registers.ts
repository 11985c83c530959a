// Controller enable and shutdown over Fabrics properties (Linux drivers/nvme/host/core.c nvme_enable_ctrl and
// nvme_disable_ctrl with shutdown): CC writes, then CSTS polled against a deadline.
import { CcShn, CstsShst, PropertyOffset, decodeCap, decodeCsts } from '../protocol/index.js';
import type { PropertyAccess } from './admin.js';
import { delay } from './delay.js';
import { ControllerInitError, TimeoutError } from './errors.js';
import { ccValue } from './fabrics-cmds.js';

/** Linux shutdown_timeout default (s). */
const SHUTDOWN_TIMEOUT_MS = 5000;
/** Longest pause between CSTS polls; polling starts at 1 ms and doubles. */
const POLL_MAX_MS = 100;

/**
 * Read CAP, write CC without then with EN, and poll CSTS.RDY for at most CAP.TO (500 ms units); CSTS.CFS is fatal.
 * Returns CAP and VS as read.
 */
export async function enableController(props: PropertyAccess): Promise<{ cap: bigint; vs: number }> {
  const cap = await props.propertyGet(PropertyOffset.CAP, 8);
  await props.propertySet(PropertyOffset.CC, 4, BigInt(ccValue({ en: false })));
  await props.propertySet(PropertyOffset.CC, 4, BigInt(ccValue({ en: true })));
  const toMs = (decodeCap(cap).to + 1) * 500;
  const deadline = Date.now() + toMs;
  for (let wait = 1; ; wait = Math.min(wait * 2, POLL_MAX_MS)) {
    const csts = decodeCsts(Number(await props.propertyGet(PropertyOffset.CSTS, 4)));
    if (csts.cfs) throw new ControllerInitError('CSTS.CFS', 'controller fatal status while enabling');
    if (csts.rdy) break;
    if (Date.now() > deadline) throw new TimeoutError(`CSTS.RDY not set within CAP.TO (${toMs} ms)`);
    await delay(wait);
  }
  const vs = Number(await props.propertyGet(PropertyOffset.VS, 4));
  return { cap, vs };
}

/** Normal shutdown: CC.SHN = normal, then poll CSTS.SHST until complete for at most the shutdown timeout. */
export async function shutdownController(props: PropertyAccess): Promise<void> {
  await props.propertySet(PropertyOffset.CC, 4, BigInt(ccValue({ en: true, shn: CcShn.NORMAL })));
  const deadline = Date.now() + SHUTDOWN_TIMEOUT_MS;
  for (let wait = 1; Date.now() < deadline; wait = Math.min(wait * 2, POLL_MAX_MS)) {
    const csts = decodeCsts(Number(await props.propertyGet(PropertyOffset.CSTS, 4)));
    if (csts.shst === CstsShst.COMPLETE) return;
    await delay(wait);
  }
}
