// Which failed I/O commands the host sends again, as Linux nvme_decide_disposition / nvme_retry_req
// (drivers/nvme/host/core.c) decide: an NVMe status with DNR clear is retried up to nvme_core.max_retries times,
// after the Command Retry Delay the status's CRD field selects (CRDT1..3 from Identify Controller, 100 ms units).
// Statuses are the 15-bit value without the phase bit (NVMe Base 2.0 §4.6.1: CRD 12:11, More 13, DNR 14).
import { StatusCodeType, statusCrd, statusDnr, statusSct } from '../protocol/index.js';

/** CRDT units (Identify Controller CRDT1..3). */
const CRDT_UNIT_MS = 100;

export interface RetryPolicy {
  /** nvme_core.max_retries: retries after the first attempt (0 = never retry). */
  maxRetries: number;
  /** CRDT1..CRDT3 from Identify Controller, in 100 ms units; all 0 (or absent) = retry at once. */
  crdt: readonly number[];
}

/**
 * Delay in ms before attempt `retries + 1` of a command that failed with `status`, or undefined when the status is
 * final: success, DNR set, retries used up, or (for multipath, `failfast`) a path error the caller fails over.
 */
export function retryDelayMs(status: number, retries: number, policy: RetryPolicy, failfast = false): number | undefined {
  if (status === 0 || statusDnr(status) || retries >= policy.maxRetries) return undefined;
  // Path related status (SCT 3h, NVMe Base 2.0 §4.6.1.2.4): multipath fails these over instead of retrying.
  if (failfast && statusSct(status) === StatusCodeType.PATH) return undefined;
  const crd = statusCrd(status);
  return crd === 0 ? 0 : (policy.crdt[crd - 1] ?? 0) * CRDT_UNIT_MS;
}
