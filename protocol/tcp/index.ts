// Public face of protocol/tcp: NVMe/TCP PDU framing shared by target and initiator.
export * from './constants.js';
export * from './crc32c.js';
export * from './data-range.js';
export * from './ic-digest.js';
export * from './lent.js';
export * from './pdu.js';
export * from './pdu-header.js';
export * from './reader.js';
export * from './term-req.js';
export * from './validate.js';
