import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['protocol/**/*.test.ts', 'connection/**/*.test.ts', 'target/**/*.test.ts', 'initiator/**/*.test.ts', 'harness/**/*.test.ts', 'cli/**/*.test.ts', 'test/e2e/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Loopback ports this machine cannot reach, held so no test listens there; etcd and headless Chromium provided
    // once for the run (docs/testing.md).
    globalSetup: ['test/fixtures/unreachable-ports.ts', 'test/fixtures/tools.ts'],
    // A process warning (TimeoutOverflowWarning, MaxListenersExceededWarning, ...) fails the file that caused it.
    // NVME_TCP_TEST_DIGESTS=1: every connection our initiator makes asks for header and data digests (docs/testing.md).
    setupFiles: ['test/fixtures/process-warnings.ts', ...(process.env['NVME_TCP_TEST_DIGESTS'] === '1' ? ['test/fixtures/digests.ts'] : [])],
  },
});
