// Public face of initiator/transport: the host's NVMe/TCP connection.
export { HostTcpQueue } from './tcp-queue.js';
export type { HostCommand, IcParams, TcpQueueHandlers, TcpQueueOptions } from './tcp-queue.js';
