// Public face of the initiator: connect(), discover(), connectAll() and the types users need; other folders import
// the initiator only through this file.
export { connect, connectAll, discover } from './connect.js';

export { Controller } from './controller.js';
export type { AsyncEvent, ControllerState, DiscoveryEntry, IoWorkerInfo, QueueInfo } from './controller.js';
export type { AnaStateName } from '../protocol/index.js';
export { Namespace } from './namespace.js';
export type { CopySourceRange, DeallocateRange, IoOptions, NamespaceInfo } from './namespace.js';
export { NamespaceReservation } from './namespace.js';
export { NamespaceZones, type ZoneFilterName, type ZoneReportOptions } from './zones.js';
export type { ResvAcquireOptions, ResvRegisterOptions, ResvReleaseOptions, ResvReport, ResvReportOptions } from './namespace.js';
export { ResvType, ResvRegisterAction, ResvAcquireAction, ResvReleaseAction, Cptpl, NwpState, FeatureEffects, HostBehaviorOffset } from '../protocol/index.js';
export type { ConnectOptions } from './options.js';
export { Hctx, mapQueues } from './dispatch/hctx.js';
export type { HctxType, QueueMap } from './dispatch/hctx.js';
export { MultipathNamespace, createMultipath } from './dispatch/multipath.js';
export type { IoPolicy, MultipathOptions } from './dispatch/multipath.js';
export type { PathController } from './dispatch/path.js';
export {
  ConnectionClosedError,
  ControllerInitError,
  ControllerStateError,
  InvalidArgumentError,
  NoPathError,
  NvmeStatusError,
  NvmeTcpError,
  TimeoutError,
  TransportFatalError,
} from './errors.js';
export { AuthenticationRequiredError, ConcatNotOfferedError, DhchapAuthError, isAuthFailure } from './auth.js';
export { checkHost, routeInterface, nicQueueCounts } from './topology.js';
export { kernelTlsReport, type KernelTlsReport } from './tls.js';
export type { HostReport, NicQueues } from './topology.js';
