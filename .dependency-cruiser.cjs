/** Layering rules of ../shared/design/ARCHITECTURE.md, enforced in `npm test`. */
module.exports = {
  forbidden: [
    {
      name: 'protocol-is-pure',
      comment: 'protocol/ imports node:buffer and its own files only (ARCHITECTURE.md rule 1)',
      severity: 'error',
      from: { path: '^protocol/', pathNot: ['^protocol/auth/crypto\\.ts$', '^protocol/tls/crypto\\.ts$'] },
      to: { pathNot: ['^protocol/', '^node:buffer$', '^buffer$', '(^|/)node_modules/@node-rs/crc32/'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'protocol-no-core-modules',
      comment: 'protocol/ does no I/O: only node:buffer among core modules',
      severity: 'error',
      from: { path: '^protocol/', pathNot: ['^protocol/auth/crypto\\.ts$', '^protocol/tls/crypto\\.ts$'] },
      to: { dependencyTypes: ['core'], pathNot: ['^buffer$', '^node:buffer$'] },
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
      from: { path: '^connection/' },
      to: { pathNot: ['^connection/', '^protocol/', '^node:(net|buffer)$', '^(net|buffer)$', '(^|/)node_modules/@node-rs/crc32/'] },
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
