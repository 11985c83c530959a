// Public face of protocol/: wire formats only; no I/O.
export * from './errors.js';
export * from './tcp/index.js';
export * from './nvme/index.js';
export * from './fabrics/index.js';
export * from './le.js';
export * from './view.js';
export * from './timer.js';
