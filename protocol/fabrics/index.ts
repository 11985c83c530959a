/** Public face of protocol/fabrics: NVMe-oF 1.1 Connect, properties, discovery log, NQNs. */
export * from './connect.js';
export * from './property.js';
export * from './discovery.js';
export * from './nqn.js';
