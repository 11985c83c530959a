import { defineConfig } from 'vitest/config';

// Container suites drive podman and podman-compose (test/containers/images.sh builds the images first): serial,
// not in `npm test`'s unit pass.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/containers/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 300_000,
    fileParallelism: false,
    // Loopback ports this machine cannot reach, held so no test listens there (docs/testing.md).
    globalSetup: ['test/fixtures/unreachable-ports.ts'],
  },
});
