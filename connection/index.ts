// Public face of connection/: the NVMe/TCP connection core both transports build on.
export { writeToDescriptor } from './fd-write.js';
export { PduBatch, type Completion } from './pdu-batch.js';
export { adoptReceivedWithUserBuffer, adoptWithUserBuffer, releaseFromServer } from './user-buffer-socket.js';
export {
  CONNECTION_TRANSITIONS,
  TcpConnection,
  type ConnectionFatal,
  type ConnectionHandler,
  type ConnectionRole,
  type ConnectionState,
  type HeaderHandler,
  type ReceivedHandlers,
  type ResumedConnection,
  type TcpConnectOptions,
  type TcpConnectionOptions,
  type WriteShaping,
} from './tcp-connection.js';
