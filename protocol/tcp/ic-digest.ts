// The DGST byte of ICReq/ICResp (TCP 1.0 §3.6.2.2 Figure 20, §3.6.2.3 Figure 21): bit 0 HDGST_ENABLE, bit 1 DDGST_ENABLE.

/** DGST bits of ICReq/ICResp. */
export const IcDigest = { HDGST_ENABLE: 0x01, DDGST_ENABLE: 0x02 } as const;

/** Which digests an ICReq asks for or an ICResp grants. */
export interface DigestChoice {
  hdgst: boolean;
  ddgst: boolean;
}

/** The DGST byte for a digest choice. */
export function packDigests(hdgst: boolean, ddgst: boolean): number {
  return (hdgst ? IcDigest.HDGST_ENABLE : 0) | (ddgst ? IcDigest.DDGST_ENABLE : 0);
}

/** The digest choice in a DGST byte; reserved bits (validated by validatePduSpecific) are ignored. */
export function unpackDigests(dgst: number): DigestChoice {
  return { hdgst: (dgst & IcDigest.HDGST_ENABLE) !== 0, ddgst: (dgst & IcDigest.DDGST_ENABLE) !== 0 };
}
