/** Public face of protocol/nvme: NVMe Base 2.0 / NVM Command Set 1.0 structures used over fabrics. */
export * from './sqe.js';
export * from './cqe.js';
export * from './status.js';
export * from './opcodes.js';
export * from './identify.js';
export * from './log-pages.js';
export * from './features.js';
export * from './uuid.js';
export * from './reservation.js';
export * from './zns.js';
