// Public face of target/transport/tcp: the NVMe/TCP listener and per-connection queue.
export { TcpListener, type BoundAddress } from './listener.js';
export { TargetTcpQueue, type HandedOffQueue, type QueueHandOff, type ResumeQueue, type TcpQueueOptions, type TcpQueueState } from './queue.js';
export { TLS_PORT_MODES, TlsKeyStore, acceptTls, type TlsPortMode, type TlsStats } from './tls.js';
