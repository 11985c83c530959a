// Public face of target/mgmt: the HTTP management API, its Prometheus metrics and the API client.
export { startApi, startTargetApi, isLoopback, ApiConfigError, type ApiOptions, type ApiHandle, type MgmtService, type TargetApiOptions } from './api.js';
export { createMetrics, type TargetMetrics, type MetricsSource, type LatencyHistogramStats } from './metrics.js';
export { MgmtClient, MgmtApiError, jsonErrorWithoutInput, type MgmtClientOptions, type HttpMethod } from './client.js';
