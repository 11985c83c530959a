// Routes that read the target as a whole: liveness, the live config, controllers and Prometheus metrics.
import { ok, type RouteEntry } from './route.js';

export const statusRoutes: readonly RouteEntry[] = [
  // What `target ctl health` promises: ports, subsystems, controllers (counts only: the route needs no token).
  {
    method: 'GET',
    path: '/healthz',
    public: true,
    handler: ({ service }) => ok({ status: 'ok', ports: service.boundPorts().length, subsystems: service.getConfig().subsystems.length, controllers: service.listControllers().length, uptimeS: Math.round(process.uptime()) }),
  },
  { method: 'GET', path: '/config', handler: ({ service }) => ok(service.getConfig()) },
  { method: 'GET', path: '/controllers', handler: ({ service }) => ok(service.listControllers()) },
  { method: 'GET', path: '/metrics', handler: async ({ metrics }) => ({ status: 200, text: await metrics.render(), contentType: metrics.contentType }) },
];
