// The shared-receive-buffer adoption lives in the connection core (connection/user-buffer-socket.ts); re-exported for
// the benches that drive a socket directly.
export { adoptWithUserBuffer } from '../../../connection/index.js';
