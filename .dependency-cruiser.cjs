/** The layering rules of docs/architecture.md, enforced in `npm test`. */

/** A rule that forbids imports `from` → `to`. */
const forbid = (name, comment, from, to) => ({ name, comment, severity: 'error', from, to });

module.exports = {
  forbidden: [
    {
      name: 'protocol-is-pure',
      comment: 'protocol/ imports node:buffer and its own files only (ARCHITECTURE.md rule 1)',
      severity: 'error',
      from: { path: '^protocol/', pathNot: ['^protocol/auth/crypto\\.ts$', '^protocol/tls/crypto\\.ts$', '^protocol/values/host-port\\.ts$'] },
      to: { pathNot: ['^protocol/', '^node:buffer$', '^buffer$', '(^|/)node_modules/@node-rs/crc32/'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'protocol-no-core-modules',
      comment: 'protocol/ does no I/O: only node:buffer among core modules',
      severity: 'error',
      from: { path: '^protocol/', pathNot: ['^protocol/auth/crypto\\.ts$', '^protocol/tls/crypto\\.ts$', '^protocol/values/host-port\\.ts$'] },
      to: { dependencyTypes: ['core'], pathNot: ['^buffer$', '^node:buffer$'] },
    },
    {
      name: 'protocol-host-port-only-isip',
      comment: 'protocol/values/host-port.ts may add node:net for isIP (a pure check of an address literal: no socket), nothing else',
      severity: 'error',
      from: { path: '^protocol/values/host-port\\.ts$' },
      to: { pathNot: ['^protocol/', '^node:net$', '^net$'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'protocol-auth-crypto-only',
      comment: 'protocol/auth/crypto.ts (DH-HMAC-CHAP) and protocol/tls/crypto.ts (TLS PSK derivations) may add node:crypto (computation only), nothing else',
      severity: 'error',
      from: { path: ['^protocol/auth/crypto\\.ts$', '^protocol/tls/crypto\\.ts$'] },
      to: { pathNot: ['^protocol/', '^node:buffer$', '^buffer$', '^node:crypto$', '^crypto$'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'connection-only-protocol-and-net',
      comment: 'connection/ (the NVMe/TCP connection core both transports use) imports protocol/, node:net and node:buffer only (rule 1)',
      severity: 'error',
      from: { path: '^connection/', pathNot: '^connection/fd-write\\.ts$' },
      to: { pathNot: ['^connection/', '^protocol/', '^node:(net|buffer)$', '^(net|buffer)$', '(^|/)node_modules/@node-rs/crc32/'] },
    },
    {
      name: 'connection-fd-write-only-fs',
      comment: 'connection/fd-write.ts writes to a socket descriptor: node:fs (writeSync/writevSync) besides node:net/buffer, nothing else',
      severity: 'error',
      from: { path: '^connection/fd-write\\.ts$' },
      to: { pathNot: ['^node:(fs|net|buffer)$', '^(fs|net|buffer)$'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'target-not-initiator',
      comment: 'target/ and initiator/ never import each other (rule 2)',
      severity: 'error',
      from: { path: '^target/' },
      to: { path: '^(initiator|harness|test)/' },
    },
    {
      name: 'initiator-not-target',
      comment: 'target/ and initiator/ never import each other (rule 2)',
      severity: 'error',
      from: { path: '^initiator/' },
      to: { path: '^(target|harness|test)/' },
    },
    {
      name: 'target-core-no-sockets',
      comment: 'target core never touches a socket; it reaches the transport through its interface (rule 3)',
      severity: 'error',
      from: { path: '^target/(core|backend)/' },
      to: { path: ['^target/transport/tcp', '^connection/', '^node:net$', '^net$'] },
    },
    // The floors of target/ and what ships (issue 44): the config vocabulary below everything, the data plane below
    // the management floors, the management direction, and built folders off test/.
    forbid('target-model-is-leaf', 'target/model/ (the config vocabulary: config shapes, placement names) imports protocol/ and itself only, so every floor of target/ may import it', { path: '^target/model/' }, { pathNot: ['^target/model/', '^protocol/'] }),
    forbid('target-floors-not-upward', 'the data plane (core, backend, transport, workers, gateway) never imports the management floors above it: config, mgmt, the service', { path: '^target/(core|backend|transport|workers|gateway|model)/' }, { path: ['^target/(config|mgmt|service)/', '^target/index\\.ts$'] }),
    forbid('target-service-not-mgmt', 'the management direction: target/mgmt/ (the HTTP API) calls TargetService, never the other way', { path: '^target/service/' }, { path: '^target/mgmt/' }),
    forbid('target-config-not-service', 'the management direction: target/config/ (schema, load, nvmetcli import) knows no service or API; callers hand its result to TargetService', { path: '^target/config/' }, { path: '^target/(service|mgmt)/' }),
    forbid(
      'shipped-not-test',
      'what the package ships (dist/ is built from these folders) never imports test/: a fixture it imported would ship as dist/test/. harness/fuzz/ is repository tooling (it replays test/fixtures/captures) and is not built into dist/ (tsconfig.build.json)',
      { path: '^(protocol|connection|target|initiator|harness|cli)/', pathNot: '^harness/fuzz/' },
      { path: '^test/' },
    ),
    {
      name: 'protocol-not-upward',
      severity: 'error',
      from: { path: '^protocol/' },
      to: { path: '^(connection|target|initiator|harness|cli|test)/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.test\\.ts$' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs'] },
  },
};
