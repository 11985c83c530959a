// Public face of connection/: the NVMe/TCP connection core both transports build on.
export { adoptWithUserBuffer } from './user-buffer-socket.js';
export {
  CONNECTION_TRANSITIONS,
  TcpConnection,
  type ConnectionFatal,
  type ConnectionHandler,
  type ConnectionRole,
  type ConnectionState,
  type TcpConnectOptions,
  type TcpConnectionOptions,
} from './tcp-connection.js';
